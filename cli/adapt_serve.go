package cli

import (
	"context"

	"github.com/speclaunch/speclaunch/plan"
)

// startAdapt starts the adaptive width loop beside the switcher when it is
// asked for; the returned func stops it.
func (sv *server) startAdapt(ctx context.Context, p *plan.Plan) func() {
	return func() {}
}
