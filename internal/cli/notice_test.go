package cli

import (
	"bytes"
	"strings"
	"testing"

	"github.com/speclaunch/speclaunch/internal/config"
)

// A settings notice is logged at its own level: at --log-level warn the
// warning (an API key typed where ps shows it) shows, the information does
// not.
func TestLogNoticesKeepTheirLevel(t *testing.T) {
	var buf bytes.Buffer
	log := newLogger(&buf, nil, "text", "warn", func(string) string { return "" })
	logNotices(log, []config.Notice{
		{Level: "info", Msg: "an informational notice"},
		{Level: "warn", Msg: "the API key typed as --api-key is on speclaunch's own command line"},
	})
	out := buf.String()
	if strings.Contains(out, "informational") {
		t.Errorf("an info notice shows at --log-level warn:\n%s", out)
	}
	if !strings.Contains(out, "WRN the API key typed") {
		t.Errorf("the warning is not logged as WRN at --log-level warn:\n%s", out)
	}
}
