package engine

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/speclaunch/speclaunch/internal/key"
)

// TestUnknownLlamaFlags: a pass-through flag llama-server does not list is
// named with the nearest it does; values (negative numbers included) and
// known flags in either form are not. With the tree detected, its own
// --help is the list: a flag only another tree lists is unknown to it
// (before, the two trees' lists were one, and a legacy tree given
// --spec-draft-n-min refused to start without a warning first).
func TestUnknownLlamaFlags(t *testing.T) {
	for _, tc := range []struct {
		name string
		sp   Spelling
		args []string
		want []string // the warnings, each as the substring it must hold
	}{
		{"known flags and values", SpellingUnknown, []string{"-ngl", "99", "--keep", "-1", "-c=8192", "--jinja", "--no-warmup"}, nil},
		{"a value that looks like a flag", SpellingUnknown, []string{"--override-kv", "-x", "--jinja"}, nil},
		{"a mistyped flag", SpellingUnknown, []string{"--ngl", "99"}, []string{"engine argument --ngl is not a flag llama-server lists in its --help; llama-server refuses to start on an unknown flag (did you mean -ngl, --gpu-layers, --n-gpu-layers?)"}},
		{"with =", SpellingUnknown, []string{"--ctx-siz=8192"}, []string{"--ctx-siz is not a flag llama-server lists in its --help; llama-server refuses to start on an unknown flag (did you mean -c, --ctx-size?)"}},
		{"nothing near", SpellingUnknown, []string{"--zzzzzzzzzz"}, []string{"--zzzzzzzzzz is not a flag llama-server lists in its --help; llama-server refuses to start on an unknown flag"}},
		{"two", SpellingUnknown, []string{"--jinj", "-ngl", "1", "--metric"}, []string{"--jinj is not", "--metric is not a flag llama-server lists in its --help; llama-server refuses to start on an unknown flag (did you mean --metrics?)"}},
		{"a tree not inspected takes either tree's", SpellingUnknown, []string{"--spec-draft-n-min", "1", "--ctx-size-draft", "4096"}, nil},
		{"a 2026 flag on a legacy tree", SpellingLegacy, []string{"-ngl", "99", "--spec-draft-n-min", "1", "-c", "4096"},
			[]string{"engine argument --spec-draft-n-min is listed by another llama.cpp tree's --help, not by the one captured for this llama-server (flag spelling legacy); a build that does not list it refuses to start on it"}},
		{"a legacy flag on a 2026 tree", Spelling2026, []string{"--ctx-size-draft=4096", "--jinja"},
			[]string{"engine argument --ctx-size-draft is listed by another llama.cpp tree's --help, not by the one captured for this llama-server (flag spelling 2026); a build that does not list it refuses to start on it"}},
		{"the legacy tree's own flags", SpellingLegacy, []string{"--draft-min", "2", "-cd", "4096", "--metrics"}, nil},
		// The 2026 --help's removed stubs (llamaflags.Removed): refused by
		// a 2026 tree, and by one not inspected, whose command is the 2026
		// one; the replacement is the help's to name.
		{"a removed stub on a 2026 tree", Spelling2026, []string{"--spec-ngram-size-n", "12", "-ngl", "99"},
			[]string{`engine argument --spec-ngram-size-n is a flag 2026 llama-server trees removed: their --help says "the argument has been removed. use the respective --spec-ngram-*-size-n or --spec-ngram-mod-n-match", and they refuse to start on it; pass the flag it names instead`}},
		{"removed stubs, a tree not inspected", SpellingUnknown, []string{"--spec-ngram-size-m=48", "--spec-ngram-min-hits", "1", "--spec-ngram-mod-n-match", "12"},
			[]string{"--spec-ngram-size-m is a flag 2026 llama-server trees removed: their --help says \"the argument has been removed. use the respective --spec-ngram-*-size-m\"",
				"--spec-ngram-min-hits is a flag 2026 llama-server trees removed: their --help says \"the argument has been removed. use the respective --spec-ngram-*-min-hits\""}},
		{"the removed stubs are a legacy tree's own", SpellingLegacy, []string{"--spec-ngram-size-n", "12", "--spec-ngram-min-hits", "1"}, nil},
		{"a mistyped flag on a legacy tree: its nearest", SpellingLegacy, []string{"--ngl", "99"}, []string{"engine argument --ngl is not a flag this llama-server (flag spelling legacy) lists in its --help; llama-server refuses to start on an unknown flag (did you mean -ngl, --gpu-layers, --n-gpu-layers?)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := unknownLlamaFlags(tc.args, tc.sp)
			if len(got) != len(tc.want) {
				t.Fatalf("unknown %v, want %d", got, len(tc.want))
			}
			for i, w := range tc.want {
				if why := got[i].Why(); !strings.Contains(why, w) || strings.HasSuffix(w, "unknown flag") && !strings.HasSuffix(why, w) {
					t.Errorf("warning %q, want %q", why, w)
				}
				if name, _, _ := strings.Cut(w, " is "); !strings.HasSuffix(name, got[i].Name) {
					t.Errorf("flag %q, want the one the warning names (%q)", got[i].Name, w)
				}
				// Another tree's flag may be this build's: said, not held
				// against a reload (a build between the captures lists it).
				if other := strings.Contains(w, "another llama.cpp tree"); got[i].Unproven() == other {
					t.Errorf("%s: unproven %v, want %v", got[i].Name, got[i].Unproven(), !other)
				}
			}
		})
	}
}

// An unknown flag given many times is one warning that says how many, and
// past maxUnknownFlagWarnings distinct ones the rest are counted in one:
// a profile of 40,000 copies of one flag printed 40,000 warnings (and took
// 42 s to judge them). Launch.Unknown holds every distinct name all the
// same: a switch judges each (internal/serve's knownToFail), and it held
// only the first 20 and a summary named after the 21st.
func TestUnknownLlamaFlagsOncePerName(t *testing.T) {
	var many []string
	for i := range maxUnknownFlagWarnings + 5 {
		many = append(many, fmt.Sprintf("--xyzzy-%d", i), fmt.Sprintf("--xyzzy-%d", i))
	}
	for _, tc := range []struct {
		name     string
		args     []string
		unknown  int    // distinct unknown names
		count    int    // warnings
		first    string // the first, as the substring it must hold
		last     string // the last
		lastName string // the last unknown name
	}{
		{"one name three times", []string{"--xyzzy", "-ngl", "1", "--xyzzy", "--xyzzy=2"}, 1, 1,
			"engine argument --xyzzy (given 3 times) is not a flag llama-server lists", "--xyzzy (given 3 times)", "--xyzzy"},
		{"two names", []string{"--metric", "--xyzzy", "--metric"}, 2, 2,
			"--metric (given 2 times) is not a flag llama-server lists in its --help; llama-server refuses to start on an unknown flag (did you mean --metrics?)", "engine argument --xyzzy is not", "--xyzzy"},
		{"past the cap", many, maxUnknownFlagWarnings + 5, maxUnknownFlagWarnings + 1,
			"engine argument --xyzzy-0 (given 2 times) is not", "and 5 more distinct engine arguments (10 in all, the first --xyzzy-20) are not flags llama-server lists", "--xyzzy-24"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			unknown := unknownLlamaFlags(tc.args, SpellingUnknown)
			if len(unknown) != tc.unknown || unknown[len(unknown)-1].Name != tc.lastName {
				t.Fatalf("unknown %v, want %d names, the last %s", unknown, tc.unknown, tc.lastName)
			}
			got := unknownWarnings(unknown)
			if len(got) != tc.count {
				t.Fatalf("%d warnings, want %d:\n%s", len(got), tc.count, strings.Join(got, "\n"))
			}
			if !strings.Contains(got[0], tc.first) || !strings.Contains(got[len(got)-1], tc.last) {
				t.Errorf("warnings\n%s\nwant the first to hold %q and the last %q", strings.Join(got, "\n"), tc.first, tc.last)
			}
		})
	}
}

// BenchmarkPassthroughChecks is the cost of judging a profile's engine
// arguments near the 1 MiB cap: 40,000 copies of one unknown flag, and
// 40,000 distinct ones. Each took tens of seconds when every argument was
// matched against every flag llama-server lists.
func BenchmarkPassthroughChecks(b *testing.B) {
	same := slices.Repeat([]string{"--xyzzy-abcdefgh"}, 40000)
	var distinct []string
	for i := range 40000 {
		distinct = append(distinct, fmt.Sprintf("--xyzzy-%d", i))
	}
	for _, bc := range []struct {
		name string
		args []string
	}{{"same", same}, {"distinct", distinct}} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				if err := CheckPassthrough(key.LlamaCpp, bc.args); err != nil {
					b.Fatal(err)
				}
				unknownWarnings(unknownLlamaFlags(bc.args, SpellingUnknown))
			}
		})
	}
}

// A pass-through argument that is no flag the engine knows and is nearest
// a key flag is refused, its value masked: the engine would refuse the
// unknown flag anyway, and meanwhile the key would sit on its command line
// as a plain argument. A known flag, a key flag spelt right and a typo of
// a flag that takes no secret pass.
func TestMisspeltKeyFlag(t *testing.T) {
	for _, tc := range []struct {
		name string
		e    key.Engine
		args []string
		want string // "" = accepted
	}{
		{"llama-server --api-kye K", key.LlamaCpp, []string{"--api-kye", "sk-live-123456"}, "--api-kye ****3456 is not a flag the engine (llama.cpp) knows; did you mean --api-key?"},
		{"--hf-tokn=T", key.LlamaCpp, []string{"-ngl", "99", "--hf-tokn=hf_abcdefgh"}, "--hf-tokn ****efgh is not a flag the engine (llama.cpp) knows; did you mean --hf-token?"},
		{"the sim", key.Sim, []string{"--apikey", "sk-live-123456"}, "did you mean --api-key?"},
		{"no value", key.MLXCEL, []string{"--api-kye"}, "--api-kye is not a flag"},
		{"vLLM", key.VLLM, []string{"--api-kee", "k1"}, "did you mean --api-key?"},
		{"SGLang", key.SGLang, []string{"--api-kye", "k1"}, "did you mean --api-key?"},
		// A case variant is a typo: llama-server refuses --API-KEY, and the
		// key would sit on its command line (before, a warning only).
		{"--API-KEY K", key.LlamaCpp, []string{"--API-KEY", "SECRETKEY123456"}, "--API-KEY ****3456 is not a flag the engine (llama.cpp) knows; did you mean --api-key? Spell it --api-key: as given"},
		{"--Api-Key=K", key.MLXCEL, []string{"--Api-Key=SECRETKEY123456"}, "did you mean --api-key?"},
		{"--HF-TOKEN T", key.LlamaCpp, []string{"--HF-TOKEN", "SECRETKEY123456"}, "did you mean --hf-token? That sets a Hugging Face token"},
		{"vLLM --API-KEY", key.VLLM, []string{"--API-KEY", "SECRETKEY123456"}, "did you mean --api-key?"},
		{"SGLang --API_KEY", key.SGLang, []string{"--API_KEY", "SECRETKEY123456"}, "did you mean --api-key?"},
		// A key file's flag too: a key pasted after it would be on the
		// command line (a hostile round saw --API-KEY-FILE K pass).
		{"--API-KEY-FILE K", key.LlamaCpp, []string{"--API-KEY-FILE", "SECRETKEY123456"}, "--API-KEY-FILE ****3456 is not a flag the engine (llama.cpp) knows; did you mean --api-key-file?"},
		{"--Api-Key-File=K", key.MLXCEL, []string{"--Api-Key-File=SECRETKEY123456"}, "did you mean --api-key-file?"},
		{"a case variant of a flag with no secret", key.LlamaCpp, []string{"--JINJA"}, ""},
		{"vLLM's --api_key is --api-key", key.VLLM, []string{"--api_key", "k1"}, ""},
		{"spelt right", key.LlamaCpp, []string{"--api-key", "sk-live-123456"}, ""},
		{"a key file", key.LlamaCpp, []string{"--api-key-file", "/run/k"}, ""},
		{"a typo of a flag with no secret", key.LlamaCpp, []string{"--metric"}, ""},
		{"vLLM's own flags", key.VLLM, []string{"--max-model-len", "8192", "--api-key", "k"}, ""},
		{"after copies of another unknown flag", key.LlamaCpp, []string{"--xyzzy", "--xyzzy", "--metric", "--api-kye", "sk-live-123456"}, "--api-kye ****3456 is not a flag"},
		{"a second copy of a misspelt key flag", key.Sim, []string{"--jinja", "--apikey", "sk-live-123456", "--apikey"}, "did you mean --api-key?"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckPassthrough(tc.e, tc.args)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.want != "" && (err == nil || !errors.Is(err, ErrKeyFlagMisspelt) || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("got %v, want %q", err, tc.want)
			case err != nil && (strings.Contains(err.Error(), "123456") || strings.Contains(err.Error(), "abcd") || strings.Contains(err.Error(), "SECRETKEY")):
				t.Errorf("the key shows: %v", err)
			}
		})
	}
}

// A key flag and its value in one argument ("--api-key K", a TOML list's
// one item where two were meant) is refused for every engine, whatever
// joins them, the value masked and the fix given: before, the engine
// command and the unknown-flag warning showed the key whole, and the sim
// served with no key. Spelt as the flag's own form, or as two arguments,
// it passes; a flag the launcher owns is refused as such, joined or not.
func TestJoinedKeyFlag(t *testing.T) {
	const fix = `give the flag and its value as two arguments (--api-key KEY; in a profile's engine.args, two list items: ["--api-key", "KEY"]) or as --api-key=KEY`
	for _, tc := range []struct {
		name string
		e    key.Engine
		args []string
		want error // nil = accepted
		text string
	}{
		{"llama-server", key.LlamaCpp, []string{"-ngl", "99", "--api-key LEAKCHECKKEY-0123456789"}, ErrKeyFlagJoined, `"--api-key ****6789": the engine reads no key from it`},
		{"the sim", key.Sim, []string{"--api-key LEAKCHECKKEY-0123456789"}, ErrKeyFlagJoined, fix},
		{"mlxcel", key.MLXCEL, []string{"--api-key LEAKCHECKKEY-0123456789"}, ErrKeyFlagJoined, fix},
		{"vLLM, two keys", key.VLLM, []string{"--api-key LEAKCHECKKEY-0123456789 LEAKCHECKKEY-9876543210"}, ErrKeyFlagJoined, `"--api-key ****6789 ****3210"`},
		{"SGLang", key.SGLang, []string{"--api-key LEAKCHECKKEY-0123456789"}, ErrKeyFlagJoined, fix},
		{"with =", key.Sim, []string{"--api-key = LEAKCHECKKEY-0123456789"}, ErrKeyFlagJoined, `"--api-key ****6789"`},
		{"a tab", key.Sim, []string{"--api-key\tLEAKCHECKKEY-0123456789"}, ErrKeyFlagJoined, `"--api-key ****6789"`},
		{"after a known flag's value", key.LlamaCpp, []string{"-c", "4096", "--api-key LEAKCHECKKEY-0123456789"}, ErrKeyFlagJoined, fix},
		{"a case variant", key.LlamaCpp, []string{"--API-KEY LEAKCHECKKEY-0123456789"}, ErrKeyFlagJoined, `"--API-KEY ****6789"`},
		{"vLLM's --hf-token", key.VLLM, []string{"--hf-token hf_LEAKabcdefghijklmnop"}, ErrKeyFlagJoined, `two list items: ["--hf-token", "KEY"]`},
		{"llama-server's --hf-token, owned", key.LlamaCpp, []string{"--hf-token hf_LEAKabcdefghijklmnop"}, ErrPassthrough, `"--hf-token ****mnop" sets a Hugging Face token`},
		{"a key file joined", key.Sim, []string{"--api-key-file /run/keys/k.txt"}, ErrKeyFlagJoined, `"--api-key-file /run/keys/k.txt": the engine reads no key file from it (it refuses to start on an unknown flag, or serves with no API key); give the flag and its file as two arguments (--api-key-file PATH; in a profile's engine.args, two list items: ["--api-key-file", "/run/keys/k.txt"])`},
		{"llama-server's key file joined", key.LlamaCpp, []string{"-ngl", "99", "--api-key-file k.txt"}, ErrKeyFlagJoined, "the engine reads no key file from it"},
		{"a key file joined, upper case", key.Sim, []string{"--API-KEY-FILE k.txt"}, ErrKeyFlagJoined, "the engine reads no key file from it"},
		{"a key file joined, three words", key.Sim, []string{"--api-key-file a b"}, ErrKeyFlagJoined, "the engine reads no key file from it"},
		{"a key file joined by a zero-width space", key.Sim, []string{"--api-key-file\u200bk.txt"}, ErrKeyFlagJoined, "the engine reads no key file from it"},
		{"a key file as two arguments", key.LlamaCpp, []string{"--api-key-file", "k.txt"}, nil, ""},
		{"a key given to the key-file flag, joined", key.Sim, []string{"--api-key-file LEAKCHECKKEY-0123456789"}, ErrKeyFlagJoined, `"--api-key-file ****6789"`},
		{"a prose value that reads as a joined key-file flag", key.LlamaCpp, []string{"--reverse-prompt", "--api-key-file k.txt"}, nil, ""},
		{"two arguments", key.LlamaCpp, []string{"--api-key", "LEAKCHECKKEY-0123456789"}, nil, ""},
		{"the flag's own form", key.LlamaCpp, []string{"--api-key=LEAKCHECKKEY-0123456789"}, nil, ""},
		{"a value with a space, its own form", key.VLLM, []string{"--api-key=LEAKCHECKKEY 0123456789"}, nil, ""},
		{"no secret", key.LlamaCpp, []string{"--alias", "my model"}, nil, ""},
		{"a zero-width space", key.LlamaCpp, []string{"--api-key\u200bLEAKCHECKKEY-0123456789"}, ErrKeyFlagJoined, fix},
		{"misspelt: the fix spells it right", key.LlamaCpp, []string{"--api-kye LEAKCHECKKEY-0123456789"}, ErrKeyFlagJoined, fix + "; --api-kye is not a flag the engine (llama.cpp) knows"},
		{"a flag secret by its words only", key.LlamaCpp, []string{"--chat-template", "x", "--eos-token </s> x"}, nil, ""},
		{"a space after the flag, the key next", key.LlamaCpp, []string{"--api-key ", "LEAKCHECKKEY-0123456789"}, ErrKeyFlagSpaced, `"--api-key ": the engine takes it for another flag; write --api-key`},
		// White space or an invisible character around the flag, however
		// the key follows: the engine reads no key flag.
		{"a zero-width space after the flag, the key next", key.LlamaCpp, []string{"--api-key\u200b", "LEAKCHECKKEY-0123456789"}, ErrKeyFlagSpaced, `"--api-key\u200b": the engine takes it for another flag; write --api-key`},
		{"a zero-width space before the flag, the key next", key.VLLM, []string{"\u200b--api-key", "LEAKCHECKKEY-0123456789"}, ErrKeyFlagSpaced, `"\u200b--api-key": the engine takes it for another flag; write --api-key`},
		{"a zero-width space before the flag's own form", key.Sim, []string{"\u200b--api-key=LEAKCHECKKEY-0123456789"}, ErrKeyFlagSpaced, `"\u200b--api-key=****6789"`},
		{"a space before a misspelt flag: spelt right", key.LlamaCpp, []string{" --api-kye", "LEAKCHECKKEY-0123456789"}, ErrKeyFlagSpaced, "write --api-key with nothing around it; --api-kye is not a flag"},
		{"SGLang's --api_key, spaced", key.SGLang, []string{"--api_key\t", "LEAKCHECKKEY-0123456789"}, ErrKeyFlagSpaced, "write --api-key"},
		// A flag the launcher owns is refused as such, space or not.
		{"llama-server's --hf-token after a space, joined", key.LlamaCpp, []string{" --hf-token hf_LEAKabcdefghijklmnop"}, ErrPassthrough, `"--hf-token ****mnop" sets a Hugging Face token`},
		{"llama-server's --hf-token after a space", key.LlamaCpp, []string{" --hf-token", "hf_LEAKabcdefghijklmnop"}, ErrPassthrough, `" --hf-token" sets a Hugging Face token`},
		{"an owned flag after a space", key.VLLM, []string{"\u200b--port", "8000"}, ErrPassthrough, "sets the listen port"},
		// Its fix holds for bench and tune too, which take no --port (a review).
		{"the listen port's fix", key.LlamaCpp, []string{"--port", "1"}, ErrPassthrough, "set it with speclaunch serve --port (or server.port in the profile); bench and tune pick their engines' ports (--base-port"},
		{"vLLM's --hf-token after a space, joined", key.VLLM, []string{" --hf-token hf_LEAKabcdefghijklmnop"}, ErrKeyFlagJoined, `["--hf-token", "KEY"]) or as --hf-token=KEY`},
		{"a value with a space before it", key.LlamaCpp, []string{"--alias", " my model"}, nil, ""},
		{"a value that starts with a newline and a dash", key.LlamaCpp, []string{"--reverse-prompt", "\n-m"}, nil, ""},
		{"a value that starts with a space and a flag's name", key.LlamaCpp, []string{"--chat-template", " --port"}, nil, ""},
		// Autocorrect's dash: the engine reads a value, the key after it
		// would sit on its command line (a campaign).
		{"an em dash", key.Sim, []string{"\u2014api-key", "LEAKCHECKKEY-0123456789"}, ErrKeyFlagDashed, "\"\u2014api-key\" begins with \u2014 (U+2014), not \"-\""},
		{"minus signs", key.LlamaCpp, []string{"\u2212\u2212api-key", "LEAKCHECKKEY-0123456789"}, ErrKeyFlagDashed, "type --api-key with ASCII dashes"},
		{"an en dash and a typo", key.LlamaCpp, []string{"\u2013api-kye=LEAKCHECKKEY-0123456789"}, ErrKeyFlagDashed, "type --api-key with ASCII dashes"},
		{"a dash before a value", key.LlamaCpp, []string{"--alias", "\u2014api model"}, nil, ""},
		{"an em dash before another flag", key.LlamaCpp, []string{"-c", "1", "\u2014port"}, nil, ""},
		// Prose after a dash is a value's, near a key flag or not (a review).
		{"an alias of prose", key.LlamaCpp, []string{"--alias", "\u2014 API key"}, nil, ""},
		// Shaped like a key flag, but the value of the flag before it (a recheck).
		{"a reverse prompt shaped like a key flag", key.LlamaCpp, []string{"--reverse-prompt", "\u2014API-KEY:"}, nil, ""},
		{"a reverse prompt with a colon", key.LlamaCpp, []string{"-r", "--api-key:"}, nil, ""},
		{"an alias shaped like a key flag", key.Sim, []string{"--alias", "\u2014api-key"}, nil, ""},
		{"after a key flag it is still refused", key.LlamaCpp, []string{"--api-key", "K", "\u2014api-key", "LEAKCHECKKEY-0123456789"}, ErrKeyFlagDashed, "ASCII dashes"},
		{"a key after it: refused", key.LlamaCpp, []string{"--alias", "\u2014api-key", "LEAKCHECKKEY-0123456789"}, ErrKeyFlagDashed, "ASCII dashes"},
		{"a prose value, then flags", key.LlamaCpp, []string{"-r", "\u2014API-KEY:", "-c", "4096"}, nil, ""},
		{"a reverse prompt of prose", key.LlamaCpp, []string{"--reverse-prompt", "\u2014API KEY:"}, nil, ""},
		{"an en dash and a space", key.LlamaCpp, []string{"--alias", "\u2013 apikey"}, nil, ""},
		{"llama-server's owned -hft", key.LlamaCpp, []string{"\u2013hft", "hf_LEAKabcdefghijklmnop"}, ErrKeyFlagDashed, "sets a Hugging Face token"},
		// A recheck: mixed dashes, hyphens of another kind within, a colon.
		{"an em dash and a hyphen", key.Sim, []string{"\u2014-api-key", "LEAKCHECKKEY-0123456789"}, ErrKeyFlagDashed, "type --api-key with ASCII dashes"},
		{"Unicode hyphens throughout", key.LlamaCpp, []string{"\u2010\u2010api\u2010key", "LEAKCHECKKEY-0123456789"}, ErrKeyFlagDashed, "type --api-key with ASCII dashes"},
		{"a hyphen and an em dash", key.LlamaCpp, []string{"-\u2014api-key=LEAKCHECKKEY-0123456789"}, ErrKeyFlagDashed, "type --api-key with ASCII dashes"},
		{"a colon for the =", key.Sim, []string{"--api-key:LEAKCHECKKEY-0123456789"}, ErrKeyFlagJoined, "the engine reads no key from it"},
		{"another dash and a colon", key.LlamaCpp, []string{"\u2212api-key:LEAKCHECKKEY-0123456789"}, ErrKeyFlagDashed, "ASCII dashes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckPassthrough(tc.e, tc.args)
			switch {
			case tc.want == nil && err != nil:
				t.Errorf("refused: %v", err)
			case tc.want != nil && (!errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.text)):
				t.Errorf("got %v, want %v and %q", err, tc.want, tc.text)
			case err != nil && strings.Contains(err.Error(), "LEAK"):
				t.Errorf("the key shows: %v", err)
			}
		})
	}
}

// A refused engine argument is a sentence naming it, what it sets and the
// fix, and is ErrPassthrough all the same: it read "engine argument
// conflicts with the launcher: "--draft-max" sets the draft width: …".
func TestOwnedArgReadsAsASentence(t *testing.T) {
	for _, tc := range []struct {
		e    key.Engine
		args []string
		want string // the whole message's start
	}{
		{key.LlamaCpp, []string{"--draft-max", "3"}, `engine argument "--draft-max" sets the draft width: speclaunch takes it as its own flag typed before -- (draft tokens N, width N+1): move it before --, or set the width with speclaunch --draft-block-size W`},
		{key.LlamaCpp, []string{"--spec-draft-n-max=4"}, `engine argument "--spec-draft-n-max=4" sets the draft width: speclaunch takes it as its own flag typed before --`},
		{key.MLXCEL, []string{"--draft-block-size", "4"}, `engine argument "--draft-block-size" sets the draft width: set the width with speclaunch --draft-block-size W`},
		{key.LlamaCpp, []string{"--api-prefix=/v2"}, `engine argument "--api-prefix=/v2" sets a path prefix for every route of the engine`},
		{key.LlamaCpp, []string{"-hft", "hf_SECRET123456"}, `engine argument "-hft" sets a Hugging Face token`},
		{key.Sim, []string{"--port", "1"}, `engine argument "--port" sets the listen port: set it with speclaunch serve --port`},
		{key.VLLM, []string{"--speculative-config", `{"method":"ngram"}`}, `engine argument --speculative-config's key "method" sets the drafter kind: set --draft-kind`},
		{key.SGLang, []string{"--speculative-num-steps", "3"}, `engine argument "--speculative-num-steps" sets the draft width:`},
	} {
		err := CheckPassthrough(tc.e, tc.args)
		if tc.e == key.VLLM {
			_, _, err = splitSpecConfig(tc.args)
		}
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) || !errors.Is(err, ErrPassthrough) {
			t.Errorf("%s %q: %v, want ErrPassthrough reading %q…", tc.e, tc.args, err, tc.want)
		}
	}
}
