package redisgate

import (
	"crypto/sha1"
	"embed"
	"encoding/hex"
	"strings"

	"github.com/redis/rueidis"
)

//go:embed scripts/*.lua
var scriptFS embed.FS

// The scripts, each sent once per connection as EVALSHA (rueidis falls back
// to EVAL when Redis does not know the SHA yet). Only the read-only ones are
// retryable: a write retried after a lost reply could act twice.
var (
	reserveScript = newScript("reserve.lua", false)
	releaseScript = newScript("release.lua", false)
	commitScript  = newScript("commit.lua", false)
	loadScript    = newScript("load.lua", false)
	adjustScript  = newScript("adjust.lua", false)
	unlockScript  = newScript("unlock.lua", false)
	adoptScript   = newScript("adopt.lua", false)
	clampScript   = newScript("clamp.lua", false)
	lookupScript  = newScript("lookup.lua", true)
	inspectScript = newScript("inspect.lua", true)

	validateScript  = newScript("validate.lua", true)
	replaceScript   = newScript("replace.lua", false)
	unreplaceScript = newScript("unreplace.lua", false)
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
	src, err := scriptFS.ReadFile("scripts/" + name)
	if err != nil {
		panic("redisgate: missing embedded script " + name)
	}
	sum := sha1.Sum(src)
	scriptNames[hex.EncodeToString(sum[:])] = strings.TrimSuffix(name, ".lua")
	scriptNames[string(src)] = strings.TrimSuffix(name, ".lua")
	if readOnly {
		return rueidis.NewLuaScriptRetryable(string(src))
	}
	return rueidis.NewLuaScript(string(src))
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
)
