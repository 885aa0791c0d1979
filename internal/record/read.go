package record

import (
	"context"

	"github.com/speclaunch/speclaunch/internal/safefile"
)

// ReadFile reads a record's .json or .md at path: a regular file of at most
// safefile.RecordLimit bytes, refused otherwise with a *safefile.Error that
// names it (a record named by mistake as a directory or a FIFO must not
// hang `policy check`), and ctx ending stops the read.
func ReadFile(ctx context.Context, path string) ([]byte, error) {
	return safefile.ReadFile(ctx, "record", path, safefile.RecordLimit)
}
