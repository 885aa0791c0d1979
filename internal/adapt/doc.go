// Package adapt holds what the adaptive width (internal/control, driven
// by serve's shell in internal/serve/control.go) reads from an engine:
// llama-server's /metrics counters (ParseMetrics, Snapshot), the key and
// directory its saved state lives under (CacheKey, StatModel, CacheDir),
// and the small types serve hands it (Target, Status, ErrNotAdapting).
// The loop that used to live here was replaced by internal/control on
// 2026-12-05 (docs/design/adaptive.md); the probe of an engine's verify
// cost by rows is internal/probe.
package adapt
