package cli

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// A profile that names no model (a container gives it in LLAMA_ARG_MODEL)
// is checked for engine arguments and variables the launcher owns all the
// same: profile validate and resolve refuse it, naming its file:line, as
// serve would with any model. Before, validate said "ok" and resolve
// refused it only once a model was given.
func TestValidateChecksEngineArgsWithoutAModel(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	for _, tc := range []struct {
		name, body string
		want       string // "" for ok
	}{
		{"llama.cpp --port", "[engine]\nname = \"llama.cpp\"\nargs = [\"--port\", \"9000\"]\n", ":3: engine argument conflicts with the launcher: \"--port\" sets the listen port"},
		{"sim --draft-block-size", "[engine]\nname = \"sim\"\nargs = [\"--draft-block-size=3\"]\n", ":3: engine argument conflicts with the launcher: \"--draft-block-size=3\" sets the draft width"},
		{"mlxcel --draft-block-size", "[engine]\nname = \"mlxcel\"\nargs = [\"--draft-block-size=3\"]\n", ":3: engine argument conflicts with the launcher"},
		{"llama.cpp LLAMA_ARG_PORT", "[engine]\nname = \"llama.cpp\"\n[engine.env]\nLLAMA_ARG_PORT = \"9000\"\n", ":3: engine.env sets LLAMA_ARG_PORT=9000, which the launcher owns"},
		{"vllm num_speculative_tokens", "[engine]\nname = \"vllm\"\nargs = [\"--speculative-config\", '{\"num_speculative_tokens\": 3}']\n", ":3: engine argument conflicts with the launcher: --speculative-config key \"num_speculative_tokens\""},
		{"sglang --port", "[engine]\nname = \"sglang\"\nargs = [\"--port\", \"1\"]\n", ":3: engine argument conflicts with the launcher: \"--port\""},
		{"llama.cpp, its own flags", "[engine]\nname = \"llama.cpp\"\nargs = [\"--jinja\"]\n[engine.env]\nLLAMA_ARG_CTX_SIZE = \"8192\"\n", ""},
	} {
		prof := filepath.Join(t.TempDir(), "v.toml")
		writeFile(t, prof, tc.body)
		for _, cmd := range []string{"profile validate", "resolve"} {
			code, o, e := runCLI(t, append(strings.Fields(cmd), "--profile", prof)...)
			want := fmt.Sprintf("error: profile %s%s", prof, tc.want)
			switch {
			case tc.want == "" && code != 0:
				t.Errorf("%s, %s: exit %d, want 0:\n%s%s", tc.name, cmd, code, o, e)
			case tc.want != "" && (code != 2 || !strings.Contains(unwrap(e), want)):
				t.Errorf("%s, %s: exit %d, want 2 and %q:\n%s%s", tc.name, cmd, code, want, o, e)
			}
		}
	}
}
