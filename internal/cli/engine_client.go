package cli

import (
	"net/http"
	"time"

	"github.com/speclaunch/speclaunch/internal/plan"
	"github.com/speclaunch/speclaunch/internal/secret"
)

// engineClient is the client for speclaunch's own requests to p's engine
// (verification, probes): it carries the engine's API key, if it has one.
func engineClient(p *plan.Plan, timeout time.Duration) *http.Client {
	return secret.Client(&http.Client{Timeout: timeout}, secret.Static(p.APIKey()))
}
