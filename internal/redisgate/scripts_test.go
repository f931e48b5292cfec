package redisgate

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"io/fs"
	"path"
	"regexp"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/require"
)

func TestJoinScript(t *testing.T) {
	t.Parallel()
	fsys := fstest.MapFS{
		"scripts/main.lua":       {Data: []byte("-- main.lua\n--\n-- include: b, a\nreturn b() + a()\n-- include: z\n")},
		"scripts/plain.lua":      {Data: []byte("return 1\n")},
		"scripts/lib/a.lua":      {Data: []byte("-- a.lua\n-- include: c\nlocal function a() return c() end")},
		"scripts/lib/b.lua":      {Data: []byte("-- b.lua\n-- include: c, a\nlocal function b() return a() end\n")},
		"scripts/lib/c.lua":      {Data: []byte("-- c.lua\nlocal function c() return 1 end\n")},
		"scripts/cycle.lua":      {Data: []byte("-- include: x\n")},
		"scripts/lib/x.lua":      {Data: []byte("-- include: y\n")},
		"scripts/lib/y.lua":      {Data: []byte("-- include: x\n")},
		"scripts/unknown.lua":    {Data: []byte("-- include: c, nope\n")},
		"scripts/lib/nested.lua": {Data: []byte("-- include: c\n")},
	}
	got, err := joinScript(fsys, "main.lua")
	require.NoError(t, err)
	// Each block once, after the blocks it includes, in the order named;
	// an include line below the header is not one.
	require.Equal(t, "-- c.lua\nlocal function c() return 1 end\n"+
		"-- a.lua\n-- include: c\nlocal function a() return c() end\n"+
		"-- b.lua\n-- include: c, a\nlocal function b() return a() end\n"+
		"-- main.lua\n--\n-- include: b, a\nreturn b() + a()\n-- include: z\n", got)

	got, err = joinScript(fsys, "plain.lua")
	require.NoError(t, err)
	require.Equal(t, "return 1\n", got)
	got, err = joinScript(fsys, "lib/nested.lua")
	require.NoError(t, err)
	require.Equal(t, "-- c.lua\nlocal function c() return 1 end\n-- include: c\n", got)

	_, err = joinScript(fsys, "cycle.lua")
	require.ErrorContains(t, err, "include cycle cycle.lua -> x -> y -> x")
	_, err = joinScript(fsys, "unknown.lua")
	require.ErrorContains(t, err, `block "nope"`)
	_, err = joinScript(fsys, "absent.lua")
	require.Error(t, err)
}

// luaFiles returns the paths under scripts/ of the scripts and, after them,
// the blocks.
func luaFiles(tb testing.TB) []string {
	tb.Helper()
	scripts, err := fs.Glob(scriptFS, "scripts/*.lua")
	require.NoError(tb, err)
	blocks, err := fs.Glob(scriptFS, "scripts/lib/*.lua")
	require.NoError(tb, err)
	require.NotEmpty(tb, scripts)
	require.NotEmpty(tb, blocks)
	var names []string
	for _, p := range append(scripts, blocks...) {
		names = append(names, strings.TrimPrefix(p, "scripts/"))
	}
	return names
}

// TestScriptsLoad checks that Redis compiles every script as the gate sends
// it, its blocks joined in front, and every block with the blocks it
// includes; and that every script file is one the gate uses.
func TestScriptsLoad(t *testing.T) {
	t.Parallel()
	g := newGate(t, Config{})
	c := rawClient(t, g)
	for _, name := range luaFiles(t) {
		src, err := joinScript(scriptFS, name)
		require.NoError(t, err, name)
		sha, err := c.Do(context.Background(), c.B().ScriptLoad().Script(src).Build()).ToString()
		require.NoError(t, err, "SCRIPT LOAD %s", name)
		sum := sha1.Sum([]byte(src))
		require.Equal(t, hex.EncodeToString(sum[:]), sha, name)
		if !strings.HasPrefix(name, "lib/") {
			require.Equal(t, strings.TrimSuffix(name, ".lua"), ScriptName(sha), "%s is not sent as joined here, or not used (newScript)", name)
		}
	}
}

// luaCode returns the code lines of a Lua file, trimmed, without comments
// and blank lines. The scripts hold no "--" inside strings.
func luaCode(src string) []string {
	var lines []string
	for line := range strings.Lines(src) {
		if i := strings.Index(line, "--"); i >= 0 {
			line = line[:i]
		}
		if line = strings.TrimSpace(line); line != "" {
			lines = append(lines, line)
		}
	}
	return lines
}

var (
	// blockDefinition matches a top-level local of a block, the names it
	// defines in group 1 or 2.
	blockDefinition = regexp.MustCompile(`(?m)^local (?:function (\w+)|([\w, ]+?) =)`)
	// trivialLua matches lines that any Lua file may hold in a row.
	trivialLua = regexp.MustCompile(`^(end|else|return|return nil|break|[})\]],?)$`)
	// holdEncoding matches Lua that reads or writes the hold layout: a field
	// pattern, a state letter, a piece of a hold cut out by position.
	holdEncoding = regexp.MustCompile(`\[\^\|\]|'[HPRC]'|"[HPRC]"|string\.(sub|match|find|gmatch)\(`)
)

// TestScriptsWriteBlocksOnce checks that text shared by scripts exists once,
// in scripts/lib: no three code lines of a block are copied into another
// file, only the hold block spells out the hold encoding, every file names
// on its include line exactly the blocks whose definitions it uses, no two
// blocks define one name, and every block is used.
func TestScriptsWriteBlocksOnce(t *testing.T) {
	t.Parallel()
	files := luaFiles(t)
	src := map[string]string{}
	for _, name := range files {
		b, err := scriptFS.ReadFile("scripts/" + name)
		require.NoError(t, err)
		src[name] = string(b)
	}

	defines := map[string][]string{} // block -> the names it defines
	definedBy := map[string]string{} // name -> block
	for _, name := range files {
		if !strings.HasPrefix(name, "lib/") {
			continue
		}
		block := strings.TrimSuffix(path.Base(name), ".lua")
		for _, m := range blockDefinition.FindAllStringSubmatch(src[name], -1) {
			for def := range strings.SplitSeq(m[1]+m[2], ",") {
				def = strings.TrimSpace(def)
				require.NotContains(t, definedBy, def, "%s and %s both define %s", definedBy[def], name, def)
				definedBy[def] = block
				defines[block] = append(defines[block], def)
			}
		}
		require.NotEmpty(t, defines[block], "%s defines nothing", name)
	}

	used := map[string]bool{}
	for _, name := range files {
		code := luaCode(src[name])
		joined := "\n" + strings.Join(code, "\n") + "\n"

		// A block's code is not copied into another file.
		for _, other := range files {
			if other == name || !strings.HasPrefix(other, "lib/") {
				continue
			}
			lines := luaCode(src[other])
			for i := 0; i+3 <= len(lines); i++ {
				if trivialLua.MatchString(lines[i]) || trivialLua.MatchString(lines[i+2]) {
					continue
				}
				window := "\n" + strings.Join(lines[i:i+3], "\n") + "\n"
				require.False(t, strings.Contains(joined, window), "%s copies code of %s: include the block instead of\n%s", name, other, window)
			}
		}

		// Only the hold block knows the hold encoding.
		if name != "lib/hold.lua" {
			for _, line := range code {
				require.NotRegexp(t, holdEncoding, line, "%s reads or writes the hold encoding itself: use the hold block (lib/hold.lua)", name)
			}
		}

		// The include line names exactly the blocks whose names it uses.
		self := strings.TrimSuffix(path.Base(name), ".lua")
		var uses []string
		for def, block := range definedBy {
			if block != self && regexp.MustCompile(`\b`+def+`\b`).MatchString(joined) && !slices.Contains(uses, block) {
				uses = append(uses, block)
			}
		}
		includes := includes([]byte(src[name]))
		slices.Sort(uses)
		sorted := slices.Sorted(slices.Values(includes))
		require.Equal(t, uses, sorted, "%s: the blocks it includes and the blocks whose names it uses", name)
		require.Len(t, slices.Compact(sorted), len(includes), "%s includes a block twice", name)
		for _, block := range includes {
			used[block] = true
		}
	}
	for block := range defines {
		require.True(t, used[block], "lib/%s.lua is included by no script", block)
	}
}
