package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/speclaunch/speclaunch/engine"
	"github.com/speclaunch/speclaunch/internal/key"
	"github.com/speclaunch/speclaunch/internal/safefile"
	"github.com/speclaunch/speclaunch/internal/secret"
	"github.com/speclaunch/speclaunch/internal/sim"
)

// simCommand is the hidden first argument that turns this binary into the
// simulated engine (engine.Caps.Self + "__sim").
const simCommand = "__sim"

func runSim(args []string, stdout, stderr io.Writer) int {
	cfg, err := sim.ParseArgs(args)
	if err != nil {
		fmt.Fprintf(stderr, "speclaunch sim: error: %v\n", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// The keys, from where llama-server reads them; a key file that cannot
	// be read stops the start, as it stops llama-server's.
	read := safefile.KeyFileReader(ctx)
	if cfg.APIKeys, err = secret.Keys(engine.APIKeySpec(key.Sim), args, os.Environ(), read); err != nil {
		fmt.Fprintf(stderr, "speclaunch sim: error: %v\n", err)
		return 2
	}
	if err := sim.Run(ctx, cfg, stdout, stderr); err != nil {
		var ee *sim.ExitError
		if errors.As(err, &ee) {
			fmt.Fprintf(stderr, "speclaunch sim: %v\n", err)
			return ee.Code
		}
		fmt.Fprintf(stderr, "speclaunch sim: error: %v\n", err)
		return 1
	}
	return 0
}
