// Package exitcode carries a command's exit code in its error: 2 for bad
// input of any kind, 3 for a width mismatch under --strict-width, the
// engine's own code when serve's engine exits. cli's Main reads it; the
// packages below cli (serve) make them.
package exitcode

// Error is an error with the exit code it ends the command with and, for
// bad input, a hint line.
type Error struct {
	Code int
	Err  error
	Hint string
}

func (e *Error) Error() string { return e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// RequestsCut is serve's exit code when it stopped with requests in
// flight cut (the shutdown timeout passed, or a second signal came): an
// orchestrator can tell it from a clean stop (0) that dropped no work.
const RequestsCut = 4

// New makes a plain exit with a code (e.g. the engine's).
func New(code int, err error) error { return &Error{Code: code, Err: err} }

// BadInput marks an operator error (an adapter's refusal, a missing file, a
// port taken): exit code 2.
type BadInput struct{ Err error }

func (b *BadInput) Error() string { return b.Err.Error() }
func (b *BadInput) Unwrap() error { return b.Err }

// Bad marks err as bad input.
func Bad(err error) error { return &BadInput{Err: err} }
