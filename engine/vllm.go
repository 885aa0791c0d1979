package engine

import (
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/speclaunch/speclaunch/internal/key"
	"github.com/speclaunch/speclaunch/internal/width"
)

// vLLM flag generations. vLLM PR #14434 (merged 2025-03-07, first in
// v0.8.0) moved every speculative setting into one JSON flag,
// --speculative-config; PR #15466 (merged 2025-03-31) removed the old
// --speculative-model / --num-speculative-tokens flags.
const (
	// SpellingVLLMConfig is --speculative-config '{...}' (vLLM >= 0.8.0).
	SpellingVLLMConfig Spelling = "speculative-config"
	// SpellingVLLMLegacy is --speculative-model M --num-speculative-tokens N
	// (vLLM < 0.8.0).
	SpellingVLLMLegacy Spelling = "speculative-model"
)

// NgramDraft is the draft.model value that selects prompt-lookup (n-gram)
// drafting, which has no draft checkpoint. vLLM itself accepts "ngram" (and
// "[ngram]") as the model of an n-gram speculative config
// (vllm/config/speculative.py, SpeculativeConfig.__post_init__).
const NgramDraft = "ngram"

// IsNgramDraft reports whether a draft model setting names n-gram drafting.
func IsNgramDraft(model string) bool {
	m := strings.TrimSpace(model)
	return m == NgramDraft || m == "[ngram]"
}

// VLLMMethod maps a drafter kind to vLLM's speculative_config "method"
// (SpeculativeMethod in vllm/config/speculative.py at 002e77c1).
func VLLMMethod(kind key.Drafter) (string, error) {
	switch kind {
	case key.Draft:
		return "draft_model", nil
	case key.Eagle, key.Eagle3, key.MTP, key.Ngram, key.DFlash:
		return string(kind), nil
	}
	return "", fmt.Errorf("%w: set --draft-kind (or draft.kind in the profile) to one of the accepted values", key.CheckSelectable(key.VLLM, kind))
}

// checkNgram ties the n-gram kind to the n-gram draft sentinel, both ways.
func checkNgram(s Spec, kind key.Drafter) error {
	switch ng := IsNgramDraft(s.Draft); {
	case ng && kind != key.Ngram:
		return fmt.Errorf("%s: draft model %q means n-gram drafting but the drafter kind is %q: set --draft-kind ngram (or draft.kind = \"ngram\" in the profile)", s.DraftFrom, s.Draft, kind)
	case !ng && kind == key.Ngram:
		return fmt.Errorf("drafter kind ngram drafts from the prompt and loads no checkpoint, but draft model %q is set (%s): set draft.model = %q (or --draft-model %s)", s.Draft, s.DraftFrom, NgramDraft, NgramDraft)
	}
	return nil
}

type vllmAdapter struct{}

func (vllmAdapter) Engine() key.Engine    { return key.VLLM }
func (vllmAdapter) DefaultBinary() string { return "vllm" }

// Command renders `vllm serve MODEL [--speculative-config JSON] --host H
// --port P` + pass-through. num_speculative_tokens = width - 1: vLLM verifies
// the drafted tokens plus the target's own next token in one step (the
// per-position acceptance counters have num_speculative_tokens positions).
func (vllmAdapter) Command(s Spec, r width.Resolution, kind key.Drafter, environ []string, caps Caps) (Launch, error) {
	if s.Model == "" {
		return Launch{}, fmt.Errorf("no target model is set: set --model (or model.path in the profile) to a local directory or a Hugging Face repo id")
	}
	host, port, base, err := hostPort(s)
	if err != nil {
		return Launch{}, err
	}
	if err := CheckPassthrough(key.VLLM, s.Args); err != nil {
		return Launch{}, fmt.Errorf("%s: %w", s.ArgsFrom, err)
	}
	extra, rest, err := splitSpecConfig(s.Args)
	if err != nil {
		return Launch{}, fmt.Errorf("%s: %w", s.ArgsFrom, err)
	}
	on, err := speculating(s, r, false)
	if err != nil {
		return Launch{}, err
	}
	l := Launch{BaseURL: base}
	sp := caps.Spelling
	if sp == SpellingUnknown {
		sp = SpellingVLLMConfig
		if on {
			l.Warnings = append(l.Warnings, "the vLLM version was not detected (binary not inspected); assumed --speculative-config (vLLM 0.8.0 and later): an older vLLM refuses it")
		}
	}
	argv := []string{binary(s, "vllm"), "serve", s.Model}
	if warn := oneWidthWarn(key.VLLM, r, caps); !on && warn != "" {
		l.Warnings = append(l.Warnings, warn) // when on, vllmTokens says it
	}
	if on {
		method, err := VLLMMethod(kind)
		if err != nil {
			return Launch{}, err
		}
		if err := checkNgram(s, kind); err != nil {
			return Launch{}, err
		}
		n, extra, warns := vllmTokens(r, caps, sp, extra)
		l.Warnings = append(l.Warnings, warns...)
		switch sp {
		case SpellingVLLMConfig:
			js, err := VLLMSpecConfig(method, s.Draft, n, extra)
			if err != nil {
				return Launch{}, fmt.Errorf("%s: %w", s.ArgsFrom, err)
			}
			argv = append(argv, "--speculative-config", js)
		case SpellingVLLMLegacy:
			if len(extra) > 0 {
				return Launch{}, fmt.Errorf("%s: --speculative-config needs vLLM 0.8.0 or later, but this vLLM is %s: upgrade vLLM or drop the --speculative-config pass-through", s.ArgsFrom, caps.Version)
			}
			switch kind {
			case key.Draft:
				argv = append(argv, "--speculative-model", s.Draft)
			case key.Ngram:
				argv = append(argv, "--speculative-model", "[ngram]")
				if !slices.ContainsFunc(rest, func(a string) bool { return strings.HasPrefix(normFlag(a), "--ngram-prompt-lookup-max") }) {
					l.Warnings = append(l.Warnings, "vLLM before 0.8.0 wants --ngram-prompt-lookup-max N for n-gram drafting (not verified against a real install): pass it through engine.args if vLLM refuses to start")
				}
			default:
				return Launch{}, fmt.Errorf("drafter kind %q needs vLLM's --speculative-config method %q (vLLM 0.8.0 and later), but this vLLM is %s: upgrade vLLM, or use drafter kind draft or ngram", kind, method, caps.Version)
			}
			argv = append(argv, "--num-speculative-tokens", strconv.Itoa(n))
		default:
			return Launch{}, fmt.Errorf("unknown vLLM flag spelling %q: the launcher knows %q and %q", sp, SpellingVLLMConfig, SpellingVLLMLegacy)
		}
	}
	argv = l.listen(argv, host, port)
	argv = append(argv, rest...)
	l.Argv = argv
	if err := buildEnv("vllm", environ, nil, s.Env, s.envFrom, nil, nil, &l); err != nil {
		return Launch{}, err
	}
	l.keysToEnv(key.VLLM, "vllm")
	return l, nil
}

// vllmOwnedKeys are the speculative_config keys the launcher sets. The
// batch-size schedule is one of them whether or not a schedule was
// resolved: the launcher's width, its headline and serve's verification
// read speclaunch's own schedule, never one inside the pass-through.
var vllmOwnedKeys = map[string]string{
	"method":                 "the drafter kind: set --draft-kind (or draft.kind in the profile)",
	"model":                  "the draft model: set --draft-model (or draft.model in the profile)",
	"num_speculative_tokens": "the draft width: set --draft-block-size W (or draft.block_size in the profile), in the launcher's unit: num_speculative_tokens = W - 1",
	VLLMScheduleKey:          "the width schedule: give it as speclaunch's own schedule, --draft-schedule (or draft.schedule in the profile, or MLXCEL_DRAFT_SCHEDULE; docs/schedule.md), in the launcher's unit, widths (K + 1): for example, [[1, 1, 3], [2, 1048576, 0]] is 1:4,2+:1",
}

// splitSpecConfig takes an operator's --speculative-config out of the
// pass-through arguments so that its other keys (draft_tensor_parallel_size,
// prompt_lookup_max, ...) merge into the launcher's JSON. Keys the launcher
// owns are refused. It reads every spelling vLLM's parser accepts (see
// docs/engines.md, "Your own --speculative-config"): --speculative-config
// and --speculative_config, the short alias -sc, `=` or a separate value,
// and the dotted form --speculative-config.KEY[.SUB] VALUE (KEY+ appends
// comma-separated strings to a list). vLLM turns dotted keys into one more
// --speculative-config at the end of its argv, which would replace the
// launcher's whole JSON, so passing them through is never right.
func splitSpecConfig(args []string) (map[string]json.RawMessage, []string, error) {
	var extra map[string]json.RawMessage
	dotted := map[string]any{}
	rest := make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		a := args[i]
		name, val, hasVal := strings.Cut(a, "=")
		flag, path, isDotted := strings.Cut(name, ".")
		if !strings.HasPrefix(flag, "-") || !isSpecConfigFlag(normFlag(flag)) {
			rest = append(rest, a)
			continue
		}
		if !hasVal {
			if i+1 >= len(args) {
				if isDotted {
					return nil, nil, fmt.Errorf("%s has no value: pass one, as in %s 1", a, a)
				}
				return nil, nil, fmt.Errorf("%s has no value: pass a JSON object such as %s '{\"draft_tensor_parallel_size\": 1}'", a, a)
			}
			i++
			val = args[i]
		}
		if isDotted {
			if err := addDottedKey(dotted, a, path, val); err != nil {
				return nil, nil, err
			}
			continue
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal([]byte(val), &m); err != nil || m == nil {
			return nil, nil, fmt.Errorf("--speculative-config %s is not a JSON object: pass keys such as '{\"draft_tensor_parallel_size\": 1}'", val)
		}
		for k := range m {
			if err := checkOwnedKey(k); err != nil {
				return nil, nil, err
			}
		}
		if extra != nil {
			return nil, nil, fmt.Errorf("--speculative-config is given twice (engine.args and after --?): merge the keys into one JSON object")
		}
		extra = m
	}
	if len(dotted) > 0 && extra == nil {
		extra = map[string]json.RawMessage{}
	}
	for _, k := range slices.Sorted(maps.Keys(dotted)) {
		if _, dup := extra[k]; dup {
			return nil, nil, fmt.Errorf("--speculative-config key %q is given both in a JSON object and as --speculative-config.%s: keep one", k, k)
		}
		b, err := json.Marshal(dotted[k])
		if err != nil {
			return nil, nil, fmt.Errorf("--speculative-config.%s: %w", k, err)
		}
		extra[k] = b
	}
	return extra, rest, nil
}

// isSpecConfigFlag reports whether a dash-normalized flag name is vLLM's
// --speculative-config or its short alias -sc.
func isSpecConfigFlag(name string) bool { return name == "--speculative-config" || name == "-sc" }

func checkOwnedKey(k string) error {
	if fix, owned := vllmOwnedKeys[k]; owned {
		return &ownedArgError{fmt.Sprintf("engine argument --speculative-config's key %q sets %s", k, fix)}
	}
	return nil
}

// addDottedKey merges --speculative-config.PATH VALUE into m the way vLLM's
// parser does: VALUE is JSON when it parses as JSON and a string otherwise;
// PATH+ makes VALUE a list of its comma-separated strings.
func addDottedKey(m map[string]any, arg, path, val string) error {
	keys := strings.Split(path, ".")
	if slices.Contains(keys, "") || slices.Contains(keys, "+") {
		return fmt.Errorf("%s: empty key in --speculative-config.KEY: write it as --speculative-config.draft_tensor_parallel_size 1", arg)
	}
	if err := checkOwnedKey(strings.TrimSuffix(keys[0], "+")); err != nil {
		return err
	}
	var v any
	last := keys[len(keys)-1]
	if strings.HasSuffix(last, "+") {
		keys[len(keys)-1] = strings.TrimSuffix(last, "+")
		list := []any{}
		for _, s := range strings.Split(val, ",") {
			list = append(list, s)
		}
		v = list
	} else if err := json.Unmarshal([]byte(val), &v); err != nil {
		v = val
	}
	for _, k := range keys[:len(keys)-1] {
		sub, ok := m[k].(map[string]any)
		if !ok {
			if _, set := m[k]; set {
				return fmt.Errorf("%s: --speculative-config key %q is set twice: keep one", arg, k)
			}
			sub = map[string]any{}
			m[k] = sub
		}
		m = sub
	}
	k := keys[len(keys)-1]
	if old, set := m[k]; set {
		ol, okOld := old.([]any)
		nl, okNew := v.([]any)
		if !okOld || !okNew {
			return fmt.Errorf("%s: --speculative-config key %q is set twice: keep one", arg, k)
		}
		v = append(ol, nl...)
	}
	m[k] = v
	return nil
}

// VLLMSpecConfig renders the --speculative-config JSON: method, model
// (omitted for n-gram, which has no checkpoint), num_speculative_tokens,
// then the operator's extra keys, in sorted key order.
func VLLMSpecConfig(method, model string, numSpecTokens int, extra map[string]json.RawMessage) (string, error) {
	m := map[string]any{"method": method, "num_speculative_tokens": numSpecTokens}
	if method != "ngram" {
		m["model"] = model
	}
	for k, v := range extra {
		m[k] = v
	}
	b, err := json.Marshal(m) // encoding/json sorts map keys
	if err != nil {
		return "", fmt.Errorf("rendering --speculative-config: %w", err)
	}
	return string(b), nil
}

// vllmTokens is num_speculative_tokens for r (width - 1) and the
// --speculative-config extras: with a schedule vLLM takes, its widest
// bucket and num_speculative_tokens_per_batch_size.
func vllmTokens(r width.Resolution, caps Caps, sp Spelling, extra map[string]json.RawMessage) (int, map[string]json.RawMessage, []string) {
	n := r.Width - 1
	sched, warn := scheduleFor(key.VLLM, r, caps)
	if sp != SpellingVLLMConfig && sched != nil {
		sched, warn = nil, fmt.Sprintf("vLLM %s predates %s (0.24): it runs one width, the schedule's at one request in flight", caps.Version, VLLMScheduleKey)+oneWidthNote(r.Schedule)
	}
	var warns []string
	if warn != "" {
		warns = append(warns, warn)
	}
	if sched == nil {
		return n, extra, warns
	}
	extra = maps.Clone(extra)
	if extra == nil {
		extra = map[string]json.RawMessage{}
	}
	extra[VLLMScheduleKey] = vllmSchedule(sched)
	// num_speculative_tokens sizes vLLM's buffers: the widest bucket.
	return sched.Max() - 1, extra, warns
}

// vllmSpecRE reads SpeculativeConfig.__repr__ (vllm/config/speculative.py
// at 002e77c1): SpeculativeConfig(method='eagle3', model='…', num_spec_tokens=3),
// which vLLM prints inside its engine config line at startup.
var vllmSpecRE = regexp.MustCompile(`SpeculativeConfig\(method='?([\w\[\]]+)'?, model=(?:'[^']*'|None), num_spec_tokens=(\d+)\)`)

// vllmOffRE is the same engine config line with speculation off.
var vllmOffRE = regexp.MustCompile(`Initializing a V1 LLM engine.*\bspeculative_config=None\b`)

// vllmErrRE matches the exception line a failed `vllm serve` ends with.
var vllmErrRE = regexp.MustCompile(`^(?:\w+\.)*(ValueError|NotImplementedError|ImportError|RuntimeError|pydantic_core\._pydantic_core\.ValidationError|ValidationError): .*`)

func (vllmAdapter) ObserveLine(line string) (Observation, bool) {
	clean := strings.TrimSpace(ansiRE.ReplaceAllString(line, ""))
	if m := vllmSpecRE.FindStringSubmatch(clean); m != nil {
		n, err := strconv.Atoi(m[2])
		if err != nil || n < 1 {
			return Observation{}, false
		}
		return Observation{Speculative: true, Kind: m[1], Width: n + 1, From: "vLLM engine config num_spec_tokens", Line: line}, true
	}
	if vllmOffRE.MatchString(clean) {
		return Observation{Kind: "off", Line: line}, true
	}
	if m := vllmErrRE.FindString(clean); m != "" {
		return Observation{Error: m, Line: line}, true
	}
	return Observation{}, false
}

// FetchesModel reports whether engine e loads ref itself although it is not
// a local path (see key.FetchesModel).
func FetchesModel(e key.Engine, ref string) bool { return key.FetchesModel(e, ref) }
