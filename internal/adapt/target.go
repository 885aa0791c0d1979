package adapt

import (
	"errors"
	"time"

	"github.com/speclaunch/speclaunch/internal/defaults"
)

// DefaultMaxWidth is the widest width the adaptive width tries, and the
// widest bench's probe check compares (defaults.AdaptMaxWidth).
const DefaultMaxWidth = defaults.AdaptMaxWidth

// Target is an engine as serve hands it to the adaptive width: its URL,
// width (1: speculation off), generation (changes whenever another engine
// process serves), model pair, whether another engine runs beside it, and
// the proxy's served seconds on it (nil: unknown).
type Target struct {
	BaseURL string
	Width   int
	Gen     uint64
	Pair    string
	Shared  bool
	Served  func(slots int) Served
}

// Served is what clients' requests that ended on an engine took there:
// seconds from the proxy's hand-over to the last byte, summed, and how
// many ended.
type Served struct {
	Secs  float64
	Ended int
}

// StateNotAdapting is the status state when serve does not adapt.
const StateNotAdapting = "not adapting"

// Status is the adaptive width's status when it does not run (why, in
// Note); the controller's own is control.Status.
type Status struct {
	State   string    `json:"state"`
	Note    string    `json:"note,omitempty"`
	Width   int       `json:"width,omitempty"`
	Updated time.Time `json:"updated"`
}

// ErrNotAdapting wraps every reason the adaptive width gives up for good;
// serve keeps serving at the width it has.
var ErrNotAdapting = errors.New("not adapting")

// ErrSwitchDropped wraps a switch error where no switch was tried: a later
// one (a reload) replaced it before it ran, or serve is stopping.
var ErrSwitchDropped = errors.New("switch not tried")
