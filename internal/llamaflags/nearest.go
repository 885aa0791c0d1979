package llamaflags

import "github.com/speclaunch/speclaunch/internal/typo"

// Nearest returns the candidate closest to name when it is close enough to
// be a typo of it (typo.Nearest).
func Nearest(name string, candidates []string) string { return typo.Nearest(name, candidates) }
