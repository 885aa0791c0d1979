package cli

import (
	"context"
	"time"

	"github.com/speclaunch/speclaunch/engine"
	"github.com/speclaunch/speclaunch/key"
	"github.com/speclaunch/speclaunch/width"
)

// verifyPy reads the width a vLLM or SGLang engine runs from what it
// serves: vLLM's /metrics per-position acceptance labels, SGLang's
// /server_info. Neither needs a probe request. When the endpoint cannot be
// read, the startup line (vLLM's engine config, SGLang's server_args) is
// the fallback.
func (r *running) verifyPy(ctx context.Context) widthCheck {
	p := r.plan
	want := p.Resolution
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	client := engineClient(p, 30*time.Second)
	var obs engine.Observation
	var err error
	if p.Settings.Engine.Value == key.VLLM {
		obs, err = engine.VerifyVLLM(cctx, p.Launch.BaseURL, client)
	} else {
		obs, err = engine.VerifySGLang(cctx, p.Launch.BaseURL, client)
	}
	if err == nil {
		return compare(want, obs)
	}
	r.mu.Lock()
	var last *engine.Observation
	for i := range r.obs {
		if o := r.obs[i]; o.Width > 0 || o.Kind == "off" {
			last = &o
		}
	}
	r.mu.Unlock()
	if last != nil {
		c := compare(want, *last)
		c.Note = "read from the startup line: " + err.Error()
		return c
	}
	if want.Source == width.Off {
		return widthCheck{Note: "speculation off: nothing to verify"}
	}
	return widthCheck{Note: "could not verify the width: " + err.Error()}
}
