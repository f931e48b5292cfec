package redisgate

import (
	"bufio"
	"bytes"
	"crypto/sha1"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"slices"
	"strings"

	"github.com/redis/rueidis"
)

// scriptFS holds the scripts and, in scripts/lib, the blocks they share.
// Redis has no include: a script names the blocks it uses on a header line
// "-- include: hold, keys" and joinScript puts their text in front of it, so
// that what Redis runs is one text while each block is written once.
//
//go:embed scripts/*.lua scripts/lib/*.lua
var scriptFS embed.FS

// The scripts, each sent once per connection as EVALSHA (rueidis falls back
// to EVAL when Redis does not know the SHA yet). Only the read-only ones are
// retryable: a write retried after a lost reply could act twice.
var (
	reserveScript  = newScript("reserve.lua", false)
	releaseScript  = newScript("release.lua", false)
	commitScript   = newScript("commit.lua", false)
	takeOverScript = newScript("takeover.lua", false)
	loadScript     = newScript("load.lua", false)
	loadStepScript = newScript("loadstep.lua", false)
	adjustScript   = newScript("adjust.lua", false)
	unlockScript   = newScript("unlock.lua", false)
	adoptScript    = newScript("adopt.lua", false)
	clampScript    = newScript("clamp.lua", false)
	heldInitScript = newScript("heldinit.lua", false)
	lookupScript   = newScript("lookup.lua", true)
	countsScript   = newScript("counts.lua", true)

	validateScript       = newScript("validate.lua", true)
	replaceScript        = newScript("replace.lua", false)
	unreplaceScript      = newScript("unreplace.lua", false)
	voidScript           = newScript("void.lua", false)
	restoreWindowsScript = newScript("restorewindows.lua", false)
)

// scriptNames maps the SHA-1 (hex) and the source of each script to its
// name without ".lua"; written only while the package initialises.
var scriptNames = map[string]string{}

// ScriptName returns the name of the gate's script ("reserve", "release"...)
// whose SHA-1 in hex, or whose source, is shaOrSource: what an EVALSHA or
// EVAL command carries. It returns "" for any other text. Tracing names the
// span of a script call with it.
func ScriptName(shaOrSource string) string { return scriptNames[shaOrSource] }

func newScript(name string, readOnly bool) *rueidis.Lua {
	src, err := joinScript(scriptFS, name)
	if err != nil {
		panic("redisgate: " + err.Error())
	}
	sum := sha1.Sum([]byte(src))
	scriptNames[hex.EncodeToString(sum[:])] = strings.TrimSuffix(name, ".lua")
	scriptNames[src] = strings.TrimSuffix(name, ".lua")
	if readOnly {
		return rueidis.NewLuaScriptRetryable(src)
	}
	return rueidis.NewLuaScript(src)
}

// includePrefix starts the header line that names the blocks a script or a
// block uses, e.g. "-- include: hold, keys".
const includePrefix = "-- include:"

// joinScript returns the text Redis runs for the script at scripts/name in
// fsys ("reserve.lua", or "lib/hold.lua" for a block): the blocks it
// includes, each after the blocks it includes in turn and each once, then
// the script. Blocks only define locals, and a Lua local must be defined
// before the code that uses it.
func joinScript(fsys fs.FS, name string) (string, error) {
	src, err := fs.ReadFile(fsys, "scripts/"+name)
	if err != nil {
		return "", fmt.Errorf("script %s: %w", name, err)
	}
	var b strings.Builder
	joined := map[string]bool{}
	var join func(via []string, blocks []string) error
	join = func(via []string, blocks []string) error {
		for _, block := range blocks {
			if joined[block] {
				continue
			}
			path := append(slices.Clone(via), block)
			if slices.Contains(via, block) {
				return fmt.Errorf("script %s: include cycle %s", name, strings.Join(path, " -> "))
			}
			text, err := fs.ReadFile(fsys, "scripts/lib/"+block+".lua")
			if err != nil {
				return fmt.Errorf("script %s: block %q (via %s): %w", name, block, strings.Join(via, " -> "), err)
			}
			if err := join(path, includes(text)); err != nil {
				return err
			}
			joined[block] = true
			b.Write(text)
			if !bytes.HasSuffix(text, []byte("\n")) {
				b.WriteByte('\n')
			}
		}
		return nil
	}
	if err := join([]string{name}, includes(src)); err != nil {
		return "", err
	}
	b.Write(src)
	return b.String(), nil
}

// includes returns the blocks named on the include lines of src's header,
// the comment lines it starts with.
func includes(src []byte) []string {
	var blocks []string
	sc := bufio.NewScanner(bytes.NewReader(src))
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "--") {
			break
		}
		if rest, ok := strings.CutPrefix(line, includePrefix); ok {
			for block := range strings.SplitSeq(rest, ",") {
				if block = strings.TrimSpace(block); block != "" {
					blocks = append(blocks, block)
				}
			}
		}
	}
	return blocks
}

// Status codes returned by reserve.lua.
const (
	reserveTaken     = 1
	reserveReplay    = 2
	reserveConflict  = 3
	reserveReleased  = 4
	reserveNotLoaded = 5
	reserveQuotaHeld = 6
	reserveSoldOut   = 7
	reserveCodeUsed  = 9
	reserveVoided    = 10
	reserveBudget    = 11
	// reserveWindowFull: the hold's occurrence of the voucher's windows
	// holds its quota (lib/budget.lua).
	reserveWindowFull = 12
)
