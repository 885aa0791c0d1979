package engine

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/speclaunch/speclaunch/internal/key"
	"github.com/speclaunch/speclaunch/internal/width"
)

// SGLangModule is the module `python -m` runs.
const SGLangModule = "sglang.launch_server"

// SGLangAlgorithm maps a drafter kind to SGLang's --speculative-algorithm
// (builtins in python/sglang/srt/server_args.py: EAGLE, EAGLE3, NEXTN,
// STANDALONE, NGRAM, DFLASH, DSPARK). NEXTN is SGLang's name for MTP heads;
// STANDALONE is a separate small draft model.
func SGLangAlgorithm(kind key.Drafter) (string, error) {
	switch kind {
	case key.Draft:
		return "STANDALONE", nil
	case key.Eagle:
		return "EAGLE", nil
	case key.Eagle3:
		return "EAGLE3", nil
	case key.MTP:
		return "NEXTN", nil
	case key.Ngram:
		return "NGRAM", nil
	case key.DFlash:
		return "DFLASH", nil
	}
	return "", fmt.Errorf("%w: set --draft-kind (or draft.kind in the profile) to one of the accepted values", key.CheckSelectable(key.SGLang, kind))
}

// SGLangWidthFlags renders the width in SGLang's settings. The launcher's
// width W is SGLang's --speculative-num-draft-tokens, the tokens one verify
// pass scores (the root, i.e. the last accepted token, included):
//   - EAGLE family (EAGLE, EAGLE3, NEXTN, STANDALONE): a chain, topk 1, of
//     W-1 draft steps. SGLang forces num_draft_tokens = num_steps + 1 when
//     topk == 1 (arg_groups/speculative_hook.py, _handle_eagle_family), so
//     all three are given and agree.
//   - DFLASH: num_draft_tokens is the block (verify window) size;
//     --speculative-dflash-block-size is its alias.
//   - NGRAM: num_draft_tokens is the verify budget of the n-gram tree.
func SGLangWidthFlags(algorithm string, w int) []string {
	n := strconv.Itoa(w)
	switch algorithm {
	case "NGRAM", "DFLASH":
		return []string{"--speculative-num-draft-tokens", n}
	}
	return []string{"--speculative-num-steps", strconv.Itoa(w - 1), "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", n}
}

type sglangAdapter struct{}

func (sglangAdapter) Engine() key.Engine    { return key.SGLang }
func (sglangAdapter) DefaultBinary() string { return "python3" }

// Command renders `python3 -m sglang.launch_server --model-path M
// [--speculative-algorithm A [--speculative-draft-model-path D] width flags]
// --host H --port P` + pass-through. engine.binary names the Python
// interpreter of the environment SGLang is installed in.
func (sglangAdapter) Command(s Spec, r width.Resolution, kind key.Drafter, environ []string, caps Caps) (Launch, error) {
	if s.Model == "" {
		return Launch{}, fmt.Errorf("no target model is set: set --model (or model.path in the profile) to a local directory or a Hugging Face repo id")
	}
	host, port, base, err := hostPort(s)
	if err != nil {
		return Launch{}, err
	}
	if err := CheckPassthrough(key.SGLang, s.Args); err != nil {
		return Launch{}, fmt.Errorf("%s: %w", s.ArgsFrom, err)
	}
	on, err := speculating(s, r, false)
	if err != nil {
		return Launch{}, err
	}
	argv := []string{binary(s, "python3"), "-m", SGLangModule, "--model-path", s.Model}
	if on {
		algo, err := SGLangAlgorithm(kind)
		if err != nil {
			return Launch{}, err
		}
		if err := checkNgram(s, kind); err != nil {
			return Launch{}, err
		}
		argv = append(argv, "--speculative-algorithm", algo)
		if kind != key.Ngram {
			argv = append(argv, "--speculative-draft-model-path", s.Draft)
		}
		argv = append(argv, SGLangWidthFlags(algo, r.Width)...)
	}
	l := Launch{BaseURL: base}
	argv = l.listen(argv, host, port)
	l.Argv = append(argv, s.Args...)
	if warn := oneWidthWarn(key.SGLang, r, caps); warn != "" {
		l.Warnings = append(l.Warnings, warn)
	}
	if err := buildEnv("sglang", environ, nil, s.Env, s.envFrom, nil, nil, &l); err != nil {
		return Launch{}, err
	}
	l.keysToEnv(key.SGLang, "sglang")
	return l, nil
}

var (
	// sglangArgsRE finds the startup `server_args=ServerArgs(...)` line.
	sglangArgsRE = regexp.MustCompile(`server_args=ServerArgs\(`)
	sglangAlgoRE = regexp.MustCompile(`\bspeculative_algorithm=(None|'(\w+)')`)
	sglangNDTRE  = regexp.MustCompile(`\bspeculative_num_draft_tokens=(None|\d+)`)
	sglangTopkRE = regexp.MustCompile(`\bspeculative_eagle_topk=(None|\d+)`)
	// sglangErrRE: the exception a failed launch_server ends with.
	sglangErrRE = regexp.MustCompile(`^(?:\w+\.)*(ValueError|AssertionError|NotImplementedError|RuntimeError|ImportError|ModuleNotFoundError)(?::.*)?$`)
)

// ObserveLine reads SGLang's startup `server_args=ServerArgs(...,
// speculative_algorithm='EAGLE', ..., speculative_num_draft_tokens=4, ...)`
// (the dataclass repr it logs at launch): width = num_draft_tokens; an
// algorithm of None means speculation is off.
func (sglangAdapter) ObserveLine(line string) (Observation, bool) {
	clean := strings.TrimSpace(ansiRE.ReplaceAllString(line, ""))
	if sglangArgsRE.MatchString(clean) {
		m := sglangAlgoRE.FindStringSubmatch(clean)
		if m == nil {
			return Observation{}, false
		}
		if m[1] == "None" {
			return Observation{Kind: "off", Line: line}, true
		}
		o := Observation{Speculative: true, Kind: m[2], From: "SGLang server_args speculative_num_draft_tokens", Line: line}
		if t := sglangTopkRE.FindStringSubmatch(clean); t != nil && t[1] != "None" && t[1] != "1" && o.Kind != "NGRAM" {
			// A tree: num_draft_tokens is the verify budget, not a chain width.
			o.From = "SGLang server_args (a draft tree, topk " + t[1] + ")"
		}
		if d := sglangNDTRE.FindStringSubmatch(clean); d != nil && d[1] != "None" {
			o.Width, _ = strconv.Atoi(d[1])
		}
		return o, true
	}
	if m := sglangErrRE.FindString(clean); m != "" {
		return Observation{Error: m, Line: line}, true
	}
	return Observation{}, false
}
