package deploy_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
)

// managedDir is the overlay of manifestDir for managed PostgreSQL, Redis and
// Kafka.
const managedDir = "kubernetes-managed"

// The parts of the overlay's Deployment patches the checks read.
type managedPod struct {
	Volumes []struct {
		Name   string `yaml:"name"`
		Secret *struct {
			SecretName string `yaml:"secretName"`
		} `yaml:"secret"`
	} `yaml:"volumes"`
	Containers []struct {
		Name string `yaml:"name"`
		Env  []struct {
			Name  string `yaml:"name"`
			Value string `yaml:"value"`
		} `yaml:"env"`
		VolumeMounts []struct {
			Name      string `yaml:"name"`
			MountPath string `yaml:"mountPath"`
			ReadOnly  bool   `yaml:"readOnly"`
		} `yaml:"volumeMounts"`
	} `yaml:"containers"`
}

// TestKubernetesManagedOverlay checks the overlay against the base and the
// binary: it builds on the base, patches only objects the base defines
// (every Deployment), sets only variables the patched containers read and
// README.md describes, and every file a *_FILE variable names lies in a
// read-only mount of a Secret in that container.
func TestKubernetesManagedOverlay(t *testing.T) {
	t.Parallel()
	base := manifests(t)
	bin := buildVoucherd(t)
	readme, err := os.ReadFile("../README.md")
	require.NoError(t, err)

	raw, err := os.ReadFile(filepath.Join(managedDir, "kustomization.yaml"))
	require.NoError(t, err)
	var kust struct {
		Resources []string `yaml:"resources"`
		Patches   []struct {
			Path string `yaml:"path"`
		} `yaml:"patches"`
	}
	require.NoError(t, yaml.Unmarshal(raw, &kust))
	require.Equal(t, []string{"../" + manifestDir}, kust.Resources)
	files, err := filepath.Glob(filepath.Join(managedDir, "*.yaml"))
	require.NoError(t, err)
	var onDisk, listed []string
	for _, f := range files {
		if b := filepath.Base(f); b != "kustomization.yaml" {
			onDisk = append(onDisk, b)
		}
	}
	for _, p := range kust.Patches {
		listed = append(listed, p.Path)
	}
	slices.Sort(listed)
	require.Equal(t, onDisk, listed, "kustomization.yaml must list every patch file, and only those")

	// Which subcommand reads each variable, over all base containers.
	accepted := map[string]map[string]bool{} // container name -> variables
	readByAny := map[string]bool{}
	for _, d := range byKind(base, "Deployment") {
		for _, c := range decodeSpec[deploymentSpec](t, d).Template.Spec.Containers {
			accepted[c.Name] = acceptedEnv(t, bin, c.Args)
			for k := range accepted[c.Name] {
				readByAny[k] = true
			}
		}
	}
	var mounts []string // the Secret mount paths of every patched container
	fileVars := map[string]string{}
	patched := map[string]bool{}
	for _, name := range listed {
		raw, err := os.ReadFile(filepath.Join(managedDir, name))
		require.NoError(t, err)
		var o object
		require.NoError(t, yaml.Unmarshal(raw, &o))
		_, ok := find(base, o.Kind, o.Metadata.Name)
		require.True(t, ok, "%s patches %s %s, which the base does not define", name, o.Kind, o.Metadata.Name)
		patched[o.Kind+"/"+o.Metadata.Name] = true
		switch o.Kind {
		case "ConfigMap", "Secret":
			for k, v := range o.Data {
				require.True(t, readByAny[k], "%s: %s is read by no container", name, k)
				require.True(t, inReadme(string(readme), k), "%s: %s is not described in README.md", name, k)
				if strings.HasSuffix(k, "_FILE") {
					fileVars[k] = v
				}
			}
			for k := range o.StringData {
				// The overlay only removes keys of the base Secret (null).
				require.Contains(t, sourceEnv(t, base, o.Kind, o.Metadata.Name), k, "%s: removes %s, which the base does not set", name, k)
			}
		case "Deployment":
			var spec struct {
				Template struct {
					Spec managedPod `yaml:"spec"`
				} `yaml:"template"`
			}
			require.NoError(t, o.Spec.Decode(&spec))
			secretVolumes := map[string]bool{}
			for _, v := range spec.Template.Spec.Volumes {
				secretVolumes[v.Name] = v.Secret != nil && v.Secret.SecretName != ""
			}
			for _, c := range spec.Template.Spec.Containers {
				reads, ok := accepted[c.Name]
				require.True(t, ok, "%s: container %s is not in the base", name, c.Name)
				var own []string
				for _, m := range c.VolumeMounts {
					require.True(t, secretVolumes[m.Name], "%s: mount %s is not a Secret volume of the pod", name, m.Name)
					require.True(t, m.ReadOnly, "%s: mount %s is not read-only", name, m.Name)
					own = append(own, m.MountPath)
				}
				mounts = append(mounts, own...)
				for _, e := range c.Env {
					require.True(t, reads[e.Name], "%s: container %s does not read %s", name, c.Name, e.Name)
					require.True(t, inReadme(string(readme), e.Name), "%s: %s is not described in README.md", name, e.Name)
					if strings.HasSuffix(e.Name, "_FILE") {
						require.True(t, under(e.Value, own), "%s: %s=%s is in no Secret mount of %s", name, e.Name, e.Value, c.Name)
					}
				}
			}
		default:
			t.Fatalf("%s: the overlay patches only ConfigMaps, Secrets and Deployments, not %s", name, o.Kind)
		}
	}
	for _, d := range byKind(base, "Deployment") {
		require.True(t, patched["Deployment/"+d.Metadata.Name], "Deployment %s does not mount the managed secrets", d.Metadata.Name)
	}
	for k, v := range fileVars {
		require.True(t, under(v, mounts), "%s=%s is in no Secret mount", k, v)
	}
}

// under reports whether path lies in one of the folders.
func under(path string, folders []string) bool {
	for _, f := range folders {
		if strings.HasPrefix(path, strings.TrimSuffix(f, "/")+"/") {
			return true
		}
	}
	return false
}
