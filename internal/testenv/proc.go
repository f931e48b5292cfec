package testenv

import (
	"fmt"

	"github.com/voucherd/voucherd/internal/localproc"
)

// failure formats an error about a server process with the tail of its log
// and the install hint.
func failure(p *localproc.Process, err error) string {
	return fmt.Sprintf("%v\n%s log %s (last lines):\n%s\n%s", err, p.Name, p.LogPath, localproc.LogTail(p.LogPath), installHint)
}
