package secret

import (
	"bytes"
	"errors"
	"io/fs"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/speclaunch/speclaunch/internal/llamaflags"
)

func TestMask(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"sk-live-0123456789abcdef", "****cdef"},
		{"abcde", "****bcde"},
		{"abcd", "****"}, // 4 or fewer: nothing shown
		{"abc", "****"},
		{"", "****"},
		{"ключ-секрет", "****крет"}, // runes, not bytes
	} {
		if got := Mask(c.in); got != c.want {
			t.Errorf("Mask(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestSecretNames(t *testing.T) {
	for _, c := range []struct {
		name string
		want bool
	}{
		{"HF_TOKEN", true},
		{"OPENAI_API_KEY", true},
		{"LLAMA_API_KEY", true},
		{"VLLM_API_KEY", true},
		{"AWS_SECRET_ACCESS_KEY", true},
		{"DB_SECRET", true},
		{"PGPASSWORD", true},
		{"hf_token", true},
		{"GITHUB_ACCESSTOKEN", true},
		{"LLAMA_ARG_API_KEY_FILE", false}, // a path; its content is read as keys
		{"LLAMA_ARG_SSL_KEY_FILE", false},
		{"TOKENIZERS_PARALLELISM", false},
		{"LLAMA_ARG_SPEC_DRAFT_N_MAX", false},
		{"MLXCEL_MAX_TOKENS", false},
		{"KEYCLOAK_URL", false},
		{"PATH", false},
		// Typos carry the key the operator meant.
		{"LLAMA_ARG_API_KYE", true},
		{"LLAMA_ARG_API_KEYS", true},
		{"LLAMA_ARG_API_KE", true},
		{"LLAMA_ARG_APIKE", true},
		{"LLAMA_ARG_HF_TOKN", true},
		{"MLXCEL_API_KYE", true},
		{"HF_TOKN", true},
		{"LLAMA_ARG_API_KYE_FILE", false},
		{"MLXCEL_KV_BITS", false},
		{"LLAMA_ARG_TOP_K", false},
		{"VLLM_NUM_SPECULATIVE_TOKENS", false},
		{"KEEP_ALIVE", false},
		// Whole last parts that name a credential; not PATH, COMPAT, AUTO.
		{"GITHUB_PAT", true},
		{"AUTH", true},
		{"PROXY_AUTH", true},
		{"DB_PASS", true},
		{"SSH_PRIVATE", true},
		{"GITHUB_PAT_FILE", false},
		{"VLLM_COMPAT", false},
		{"AUTH_MODE", false},
		{"LLAMA_ARG_AUTO", false},
		{"BYPASS", false},
		{"PATH", false},
		{"MY_BEARER", true},
		{"BEARER_MODE", false},
		// A cookie, a signed token, a data source's URL with its password,
		// a signature, a shared access signature, a PEM block (a
		// hostile-input campaign printed each in clear); not a desktop's
		// session name (a review: "ubuntu" masked in every path).
		{"COOKIE", true},
		{"DESKTOP_SESSION", false},
		{"JWT", true},
		{"DATABASE_DSN", true},
		{"SIGNATURE", true},
		{"AZURE_SAS", true},
		{"CERT_PEM", true},
		{"SESSION_TIMEOUT", false},
		{"COOKIE_PATH", false},
		{"SAMPLES", false},
	} {
		if got := SecretEnv(c.name); got != c.want {
			t.Errorf("SecretEnv(%q) = %v, want %v", c.name, got, c.want)
		}
	}
	for _, c := range []struct {
		name string
		want bool
	}{
		{"--api-key", true},
		{"--hf-token", true},
		{"-hft", true},
		{"--admin-api-key", true},
		{"--api-key-file", false},
		{"--ssl-key-file", false},
		{"--ssl-keyfile", false},
		{"--speculative-num-draft-tokens", false},
		{"--max-num-batched-tokens", false},
		{"--tokenizer", false},
		{"--n-keep", false},
		{"api-key", false},  // not a flag
		{"--api-kye", true}, // typos of a secret flag: the value is still a key
		{"--hf-tokne", true},
		{"--apikey", true},
		{"--api_key", true},
		{"--admin-api-kye", true},
		{"--api-kye-file", false},
		{"--api-prefix", false},
		{"--hf-repo", false},
		// Flags no engine lists, named as a secret variable is (one rule):
		// their value is masked as a key's.
		{"--auth", true},
		{"--proxy-auth", true},
		{"--bearer", true},
		{"--db-password", true},
		{"--db_pass", true},
		{"--credential", true},
		{"--secret", true},
		{"--token", true},
		{"-k", true},
		{"--oauth", true},
		{"--authorization", true},
		{"--passphrase", true},
		{"--ssh-passphrase", true},
		{"--oauth-scope", false},
		{"--API-KEY", true},
		{"--auth-mode", false},
		{"--compat", false},
		{"--top-k", false},
		{"--cache-type-k", false},
		{"--bypass", false},
		// Switches take no value, whatever their names say.
		{"--cors-credentials", false},
		{"--no-cors-credentials", false},
		{"--CORS-Credentials", false},
		{"--no-auth", false},
		{"--disable-auth", false},
		{"--no_token", false},
		// White space or an invisible character around the name hides it
		// from the engine, not from masking.
		{"--api-key\u200b", true},
		{"\u200b--api-key", true},
		{" --hf-token\t", true},
		{"\ufeff-hft", true},
		{"\u200b--api-key-file", false},
		{"--hf_tok", true}, // a typo of a listed flag is secret (ListedFlag)
	} {
		if got := SecretFlag(c.name); got != c.want {
			t.Errorf("SecretFlag(%q) = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestMaskArgv(t *testing.T) {
	for _, c := range []struct {
		name     string
		in, want []string
	}{
		{"space", []string{"llama-server", "-m", "t.gguf", "--api-key", "sk-0123456789", "--port", "8080"},
			[]string{"llama-server", "-m", "t.gguf", "--api-key", "****6789", "--port", "8080"}},
		{"equals", []string{"llama-server", "--api-key=sk-0123456789"}, []string{"llama-server", "--api-key=****6789"}},
		{"short key", []string{"--api-key", "abcd"}, []string{"--api-key", "****"}},
		{"comma list", []string{"--api-key", "first-key-1111,second-key-2222"}, []string{"--api-key", "****2222"}},
		{"hf token short form", []string{"-hft", "hf_abcdefgh"}, []string{"-hft", "****efgh"}},
		{"optional value absent", []string{"--hf-token", "--port", "8000"}, []string{"--hf-token", "--port", "8000"}},
		{"key file path shown", []string{"--api-key-file", "/run/keys.txt"}, []string{"--api-key-file", "/run/keys.txt"}},
		{"flag last", []string{"--api-key"}, []string{"--api-key"}},
		{"several values", []string{"vllm", "serve", "m", "--api-key", "sk-first-0001", "sk-second-0002", "--port", "1"}, []string{"vllm", "serve", "m", "--api-key", "****0001", "****0002", "--port", "1"}},
		{"width untouched", []string{"--spec-draft-n-max", "3", "--speculative-num-draft-tokens", "4"}, []string{"--spec-draft-n-max", "3", "--speculative-num-draft-tokens", "4"}},
		// The flag and its key in one argument (a TOML list's one item):
		// shown whole before, "--hf-token hf_…" masked by its shape alone.
		{"joined", []string{"--api-key LEAKCHECKKEY-0123456789", "--port", "1"}, []string{"--api-key ****6789", "--port", "1"}},
		{"joined with =", []string{"--api-key = LEAKCHECKKEY-0123456789"}, []string{"--api-key ****6789"}},
		{"joined by a tab", []string{"--api-key\tLEAKCHECKKEY-0123456789"}, []string{"--api-key ****6789"}},
		{"joined, several keys", []string{"--api-key k-first-0001  k-second-0002"}, []string{"--api-key ****0001 ****0002"}},
		{"joined, a typo", []string{"--API-KYE LEAKCHECKKEY-0123456789"}, []string{"--API-KYE ****6789"}},
		{"a colon for the =", []string{"--hf-token:SEKRETzz9876", "-hft:SEKRETzz9876"}, []string{"--hf-token:****9876", "-hft:****9876"}},
		{"joined, a space in the flag's own form", []string{"--api-key=LEAK 0123456789"}, []string{"--api-key=****6789"}},
		{"joined, a key file", []string{"--api-key-file /run/my keys.txt"}, []string{"--api-key-file /run/my keys.txt"}},
		{"a space after the flag, the key next", []string{"--api-key ", "LEAKCHECKKEY-0123456789"}, []string{"--api-key ", "****6789"}},
		{"joined by a zero-width space", []string{"--api-key\u200bLEAKCHECKKEY-0123456789"}, []string{"--api-key ****6789"}},
		// A zero-width space around the flag, the key the next item.
		{"a zero-width space after the flag, the key next", []string{"--api-key\u200b", "LEAKCHECKKEY-0123456789"}, []string{"--api-key\u200b", "****6789"}},
		{"a zero-width space before the flag, the key next", []string{"\u200b--api-key", "LEAKCHECKKEY-0123456789"}, []string{"\u200b--api-key", "****6789"}},
		{"a zero-width space before a flag's own form", []string{"\u200b--auth=hunter2hunter"}, []string{"\u200b--auth=****nter"}},
		{"a space before llama.cpp's short flag", []string{" -hft", "hunter2hunter"}, []string{" -hft", "****nter"}},
		// Autocorrect's dashes: the engine reads no flag, the key is one
		// still (a campaign: shown whole in the dry run and the log).
		{"an em dash", []string{"\u2014api-key", "SECRETKEY123"}, []string{"\u2014api-key", "****Y123"}},
		{"an en dash", []string{"\u2013api-key", "SECRETKEY123"}, []string{"\u2013api-key", "****Y123"}},
		{"minus signs", []string{"\u2212\u2212api-key", "SECRETKEY123"}, []string{"\u2212\u2212api-key", "****Y123"}},
		{"fullwidth hyphens", []string{"\uff0d\uff0dhf-token", "SECRETKEY123"}, []string{"\uff0d\uff0dhf-token", "****Y123"}},
		{"an en dash, joined by =", []string{"\u2013api-key=SECRETKEY123"}, []string{"\u2013api-key=****Y123"}},
		{"a dash before a value is prose", []string{"--alias", "\u2014 my model"}, []string{"--alias", "\u2014 my model"}},
		{"prose near a key flag", []string{"--alias", "\u2014 API key", "--port", "1"}, []string{"--alias", "\u2014 API key", "--port", "1"}},
		// Prose shaped like a secret-named flag with another dash is no
		// flag: what follows it is not masked (a recheck: model names hid).
		{"a dash before a secret-ish word", []string{"--alias", "\u2014secret", "-np", "4", "--served-model-name", "\u2014token", "llama"}, []string{"--alias", "\u2014secret", "-np", "4", "--served-model-name", "\u2014token", "llama"}},
		{"a modifier minus", []string{"\u02D7\u02D7api-key", "SECRETKEY123"}, []string{"\u02D7\u02D7api-key", "****Y123"}},
		// A recheck: an ASCII dash beside another, and hyphens of another
		// kind within the name.
		{"an em dash and a hyphen", []string{"\u2014-api-key", "SECRETKEY123"}, []string{"\u2014-api-key", "****Y123"}},
		{"a hyphen and an em dash", []string{"-\u2014api-key", "SECRETKEY123"}, []string{"-\u2014api-key", "****Y123"}},
		{"Unicode hyphens throughout", []string{"\u2010\u2010api\u2010key", "SECRETKEY123"}, []string{"\u2010\u2010api\u2010key", "****Y123"}},
		{"minus signs throughout, joined", []string{"\u2212\u2212api\u2212key=SECRETKEY123"}, []string{"\u2212\u2212api\u2212key=****Y123"}},
		{"the flag as its own value", []string{"--api-key=--api-key", "SECRETKEY123"}, []string{"--api-key=****-key", "****Y123"}},
		{"vLLM's keys after the = form", []string{"--api-key=SECRETKEY123", "SECRETKEY456"}, []string{"--api-key=****Y123", "****Y456"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			orig := slices.Clone(c.in)
			if got := MaskArgv(c.in); !slices.Equal(got, c.want) {
				t.Errorf("MaskArgv(%q) = %q, want %q", c.in, got, c.want)
			}
			if !slices.Equal(c.in, orig) {
				t.Errorf("MaskArgv changed its input: %q", c.in)
			}
		})
	}
}

func TestMaskEnv(t *testing.T) {
	in := []string{"HF_TOKEN=hf_0123456789", "OPENAI_API_KEY=sk-abcdefgh", "APP_SECRET=xyz", "LLAMA_ARG_API_KEY_FILE=/k.txt", "PATH=/usr/bin", "EMPTY_TOKEN="}
	want := []string{"HF_TOKEN=****6789", "OPENAI_API_KEY=****efgh", "APP_SECRET=****", "LLAMA_ARG_API_KEY_FILE=/k.txt", "PATH=/usr/bin", "EMPTY_TOKEN=****"}
	if got := MaskEnv(in); !slices.Equal(got, want) {
		t.Errorf("MaskEnv = %q, want %q", got, want)
	}
	m := MaskEnvMap(map[string]string{"LLAMA_API_KEY": "sk-0123456789", "LLAMA_ARG_PORT": "8080", "LLAMA_ARG_ALIAS": "\u2014api-key SECRETKEY123"})
	if m["LLAMA_API_KEY"] != "****6789" || m["LLAMA_ARG_PORT"] != "8080" || m["LLAMA_ARG_ALIAS"] != "\u2014api-key ****Y123" {
		t.Errorf("MaskEnvMap = %v", m)
	}
	// A key flag and its key pasted as a variable's value (a recheck);
	// not another program's options ("-k engine" hid every "engine").
	if got := EnvValues([]string{"LLAMA_ARG_ALIAS=--api-key SECRETKEY123", "PYTEST_ADDOPTS=-k engine", "MAKEFLAGS=-k --jobs=16"}); !slices.Equal(got, []string{"SECRETKEY123"}) {
		t.Errorf("EnvValues = %q, want the pasted key alone", got)
	}
	if got := EnvValues(in); !slices.Equal(got, []string{"hf_0123456789", "sk-abcdefgh", "xyz"}) {
		t.Errorf("EnvValues = %q", got)
	}
}

var llamaSpec = Spec{Flags: []string{"--api-key"}, FileFlags: []string{"--api-key-file"}, Env: []string{"LLAMA_API_KEY"}, FileEnv: []string{"LLAMA_ARG_API_KEY_FILE"}, Split: true}

func TestKeys(t *testing.T) {
	files := map[string]string{
		"/keys.txt":     "# operators\nkey-from-file-1\n\n#a comment\nkey-from-file-2\n",
		"/spaces.txt":   "  k1 \n",
		"/env-keys":     "env-file-key\n",
		"/crlf.txt":     "# CRLF\ncrlf-key\r\n",
		"/ctl.txt":      "# a pasted escape\nctl\x1bkey\n",
		"/empty.txt":    "",
		"/comments.txt": "\n\n#c\n",
	}
	read := func(p string) ([]byte, error) {
		s, ok := files[p]
		if !ok {
			return nil, fs.ErrNotExist
		}
		return []byte(s), nil
	}
	nope := filepath.Join(t.TempDir(), "nope")
	for _, c := range []struct {
		name       string
		sp         Spec
		argv, env  []string
		want       []string
		wantErrSub string
	}{
		{name: "none", sp: llamaSpec, argv: []string{"llama-server", "-m", "x"}, env: []string{"PATH=/bin"}},
		{name: "flag", sp: llamaSpec, argv: []string{"--api-key", "k1"}, want: []string{"k1"}},
		{name: "flag equals and comma list", sp: llamaSpec, argv: []string{"--api-key=k1,,k2"}, want: []string{"k1", "k2"}},
		{name: "file as llama-server reads it", sp: llamaSpec, argv: []string{"--api-key-file", "/keys.txt"},
			want: []string{"key-from-file-1", "key-from-file-2"}},
		// Keys no HTTP client can send: every request would get 401.
		// Each names where the key came from (before, none did).
		{name: "carriage return", sp: llamaSpec, argv: []string{"--api-key-file=/crlf.txt"}, wantErrSub: "api-key-file: key file /crlf.txt:2: an API key ends with a carriage return (a key file saved with CRLF line ends?)"},
		{name: "spaces around a key", sp: llamaSpec, argv: []string{"--api-key-file=/spaces.txt"}, wantErrSub: "api-key-file: key file /spaces.txt:1: an API key begins with a space and ends with a space"},
		{name: "spaces in an env key file", sp: llamaSpec, env: []string{"LLAMA_ARG_API_KEY_FILE=/spaces.txt"}, wantErrSub: "LLAMA_ARG_API_KEY_FILE: key file /spaces.txt:1: an API key begins"},
		{name: "a blank variable", sp: llamaSpec, env: []string{"LLAMA_API_KEY= "}, wantErrSub: "env LLAMA_API_KEY: an API key begins with a space"},
		{name: "a spaced key in a list", sp: llamaSpec, env: []string{"LLAMA_API_KEY=good-key-1, k2"}, wantErrSub: "env LLAMA_API_KEY: an API key begins with a space"},
		{name: "a spaced flag key", sp: llamaSpec, argv: []string{"--api-key", "k1 "}, wantErrSub: "engine flag --api-key gives an API key that ends with a space"},
		// Given twice, the second flag is no key (a campaign: it became
		// the key, and the key after it a plain argument shown whole).
		{name: "the flag twice", sp: llamaSpec, argv: []string{"--api-key", "--api-key", "SECRETKEY123"}, wantErrSub: "engine flag --api-key has no value (the argument after it, --api-key, is a key flag: one of the two is extra)"},
		{name: "a spaced further value", sp: Spec{Flags: []string{"--api-key"}, Multi: true}, argv: []string{"--api-key", "k1", " k2"}, wantErrSub: "engine flag --api-key gives an API key that begins"},
		// A variable set from a file with its newline ($(cat key)\n), named
		// as one, not as "a space, a tab or a carriage return".
		{name: "a trailing newline", sp: llamaSpec, env: []string{"LLAMA_API_KEY=nl-key-123456\n"}, wantErrSub: "env LLAMA_API_KEY: an API key ends with a newline, which no HTTP client can send"},
		{name: "a tab within is sent", sp: llamaSpec, env: []string{"LLAMA_API_KEY=tab\tkey"}, want: []string{"tab\tkey"}},
		// A control character within: Go's client refuses the header
		// ("invalid header field value"), so every request got 401.
		{name: "a newline within a variable's key", sp: llamaSpec, env: []string{"LLAMA_API_KEY=NLKEY-123456\nsecond"}, wantErrSub: "env LLAMA_API_KEY: an API key holds a control character (a newline) at byte 13, which no HTTP client can send"},
		{name: "a DEL within a listed key", sp: llamaSpec, env: []string{"LLAMA_API_KEY=good-key-1,bad\x7fkey"}, wantErrSub: "an API key holds a control character (a DEL) at byte 4"},
		{name: "a NUL within a flag's key", sp: llamaSpec, argv: []string{"--api-key", "nul\x00key"}, wantErrSub: "engine flag --api-key gives an API key that holds a control character (a NUL) at byte 4"},
		{name: "a bell within a further value", sp: Spec{Flags: []string{"--api-key"}, Multi: true}, argv: []string{"--api-key", "k1", "k\a2"}, wantErrSub: "engine flag --api-key gives an API key that holds a control character (U+0007) at byte 2"},
		{name: "an escape within a key file's line", sp: llamaSpec, argv: []string{"--api-key-file", "/ctl.txt"}, wantErrSub: "api-key-file: key file /ctl.txt:2: an API key holds a control character (an escape) at byte 4"},
		{name: "a newline within a vLLM key", sp: Spec{Flags: []string{"--api-key"}, Env: []string{"VLLM_API_KEY"}}, env: []string{"VLLM_API_KEY=a\nb"}, wantErrSub: "env VLLM_API_KEY: an API key holds a control character (a newline) at byte 2"},
		// A key source given with no key in it would start the engine
		// open while the operator believes a key is set.
		{name: "empty file", sp: llamaSpec, argv: []string{"--api-key-file", "/empty.txt"}, wantErrSub: "key file /empty.txt holds no key"},
		{name: "file of comments", sp: llamaSpec, argv: []string{"--api-key-file", "/comments.txt"}, wantErrSub: "key file /comments.txt holds no key"},
		{name: "env file empty", sp: llamaSpec, env: []string{"LLAMA_ARG_API_KEY_FILE=/empty.txt"}, wantErrSub: "LLAMA_ARG_API_KEY_FILE: key file /empty.txt holds no key"},
		{name: "env of commas", sp: llamaSpec, env: []string{"LLAMA_API_KEY=,"}, wantErrSub: `LLAMA_API_KEY="," holds no key`},
		{name: "env", sp: llamaSpec, env: []string{"LLAMA_API_KEY=e1,e2"}, want: []string{"e1", "e2"}},
		{name: "env file", sp: llamaSpec, env: []string{"LLAMA_ARG_API_KEY_FILE=/env-keys"}, want: []string{"env-file-key"}},
		{name: "flags before env", sp: llamaSpec, argv: []string{"--api-key", "cli"}, env: []string{"LLAMA_API_KEY=env"}, want: []string{"cli", "env"}},
		{name: "not llama's own name", sp: llamaSpec, env: []string{"LLAMA_ARG_API_KEY=ignored"}},
		{name: "flag without value", sp: llamaSpec, argv: []string{"llama-server", "--api-key"}, wantErrSub: "engine flag --api-key has no value"},
		{name: "flag with an empty value", sp: llamaSpec, argv: []string{"--api-key", ""}, wantErrSub: "engine flag --api-key has no value"},
		{name: "flag with only commas", sp: llamaSpec, argv: []string{"--api-key=,"}, wantErrSub: "engine flag --api-key has no value"},
		{name: "file flag without value", sp: llamaSpec, argv: []string{"--api-key-file="}, wantErrSub: "engine flag --api-key-file has no value"},
		{name: "no split for vllm", sp: Spec{Flags: []string{"--api-key"}, Env: []string{"VLLM_API_KEY"}}, argv: []string{"--api-key", "a,b"}, env: []string{"VLLM_API_KEY=v"}, want: []string{"a,b", "v"}},
		{name: "several values", sp: Spec{Flags: []string{"--api-key"}, Multi: true}, argv: []string{"--api-key", "k1", "k2", "--port", "1", "--api-key=k3", "x"}, want: []string{"k1", "k2", "k3"}},
		// A second key after a key flag of one value: on the engine's
		// command line, which refuses it at start (a recheck).
		{name: "one value without Multi", sp: llamaSpec, argv: []string{"--api-key", "k1", "SEKRETkey7654321"}, wantErrSub: "engine flag --api-key and its key are followed by a plain argument (****4321)"},
		{name: "one value without Multi, = form", sp: llamaSpec, argv: []string{"--api-key=k1", "SEKRETkey7654321"}, wantErrSub: "(--api-key K1,K2)"},
		{name: "-- for the key", sp: llamaSpec, argv: []string{"--api-key", "--", "SEKRETkey7654321"}, wantErrSub: "engine flag --api-key has no value (the argument after it is --, the end of flags)"},
		// In a directory that exists: clearly a path (ClearlyPath).
		{name: "missing file", sp: llamaSpec, argv: []string{"--api-key-file", nope}, wantErrSub: "--api-key-file: "},
		{name: "missing env file", sp: llamaSpec, env: []string{"LLAMA_ARG_API_KEY_FILE=" + nope}, wantErrSub: "LLAMA_ARG_API_KEY_FILE: "},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := Keys(c.sp, c.argv, c.env, read)
			if c.wantErrSub != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErrSub) || strings.HasPrefix(c.wantErrSub, "--") && !errors.Is(err, fs.ErrNotExist) {
					t.Fatalf("err = %v, want one containing %q (a file's wrapping fs.ErrNotExist)", err, c.wantErrSub)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, c.want) {
				t.Errorf("Keys = %q, want %q", got, c.want)
			}
		})
	}
}

// The CRLF guess is for a key file's line only: a key with a space in
// LLAMA_API_KEY or after --api-key involves no file.
func TestUnsendableNamesCRLFForFilesOnly(t *testing.T) {
	read := func(string) ([]byte, error) { return []byte("crlf-key\r\n"), nil }
	for _, c := range []struct {
		argv, env []string
		crlf      bool
	}{
		{nil, []string{"LLAMA_API_KEY=good key "}, false},
		{[]string{"--api-key", " k1"}, nil, false},
		{[]string{"--api-key-file", "/k.txt"}, nil, true},
		{nil, []string{"LLAMA_ARG_API_KEY_FILE=/k.txt"}, true},
	} {
		_, err := Keys(llamaSpec, c.argv, c.env, read)
		if err == nil || strings.Contains(err.Error(), "CRLF") != c.crlf || !strings.Contains(err.Error(), "which no HTTP client can send") {
			t.Errorf("%q %q: %v, want the CRLF guess %v", c.argv, c.env, err, c.crlf)
		}
	}
}

// A key pasted where its file belongs (--api-key-file K) is refused
// without the value: before, "api key file K: no such file" printed the
// key in full. A bare name that is a file is read.
func TestKeyGivenAsKeyFile(t *testing.T) {
	read := func(p string) ([]byte, error) {
		if p == "keys" {
			return []byte("bare-name-key\n"), nil
		}
		return nil, &fs.PathError{Op: "open", Path: p, Err: fs.ErrNotExist}
	}
	const fix = "(the value is not shown, since it may be a key: give a key with --api-key or LLAMA_API_KEY, a file's path with --api-key-file or LLAMA_ARG_API_KEY_FILE)"
	for _, c := range []struct {
		name      string
		argv, env []string
		want      string
	}{
		{"flag", []string{"--api-key-file", "SECRETKEY123456"}, nil, "--api-key-file: no such file " + fix},
		{"flag=", []string{"--api-key-file=SECRETKEY123456"}, nil, "--api-key-file: no such file " + fix},
		{"variable", nil, []string{"LLAMA_ARG_API_KEY_FILE=SECRETKEY123456"}, "LLAMA_ARG_API_KEY_FILE: no such file " + fix},
	} {
		_, err := Keys(llamaSpec, c.argv, c.env, read)
		var kf *KeyNotFileError
		if err == nil || err.Error() != c.want || !errors.As(err, &kf) || kf.Value != "SECRETKEY123456" {
			t.Errorf("%s: err = %v, want %q (a KeyNotFileError with the value)", c.name, err, c.want)
		}
	}
	if got, err := Keys(llamaSpec, []string{"--api-key-file", "keys"}, nil, read); err != nil || !slices.Equal(got, []string{"bare-name-key"}) {
		t.Errorf("a bare name that is a file: %q, %v", got, err)
	}
}

// A key-file value that cannot be read is shown in the error only where
// it is clearly a path (ClearlyPath): it exists, or its directory, named
// in it, does. Before, any value with "/" or a short dot-extension was
// shown: half of the keys `openssl rand -base64 32` prints, and
// hunter2.pass. Every other value is refused without it
// (KeyNotFileError), for each way of giving it.
func TestKeyFileValueShownOnlyWhenClearlyPath(t *testing.T) {
	dir := t.TempDir()
	home := filepath.Join(dir, "home")
	for _, d := range []string{home, filepath.Join(dir, "sub"), filepath.Join(dir, "adir")} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Chdir(dir)
	t.Setenv("HOME", home) // "~" is not expanded all the same
	read := func(p string) ([]byte, error) { return os.ReadFile(p) }
	for _, c := range []struct {
		value string
		shown bool
	}{
		{"q1w2E3r4T5y6/U7i8O9p0+ABCDEFGHijklmnopQR=", false}, // base64 with / + =
		{"/Q1w2E3r4T5y6U7i8O9p0+ABCDEFGHijklmnopQR=", false}, // its directory would be / alone
		{"hunter2.pass", false},
		{"keys.txt", false}, // a bare name: no directory part
		{"SECRETKEY123456", false},
		{"/nonexistent-dir/k.txt", false},
		{"~/k", false},
		{filepath.Join(dir, "k.txt"), true}, // an existing directory, the file missing
		{"./k.txt", true},                   // ./ names the current directory
		{"sub/k.txt", true},
		{"adir", true}, // exists: a directory, not a file
	} {
		for _, way := range []struct {
			argv, env []string
			from      string
		}{
			{[]string{"--api-key-file", c.value}, nil, "--api-key-file"},
			{[]string{"--api-key-file=" + c.value}, nil, "--api-key-file"},
			{nil, []string{"LLAMA_ARG_API_KEY_FILE=" + c.value}, "LLAMA_ARG_API_KEY_FILE"},
		} {
			_, err := Keys(llamaSpec, way.argv, way.env, read)
			var kf *KeyNotFileError
			isKF := errors.As(err, &kf)
			switch {
			case err == nil:
				t.Errorf("%q %q: no error", way.argv, way.env)
			case c.shown && (isKF || !strings.Contains(err.Error(), c.value)):
				t.Errorf("%q %q: %v, want the path shown", way.argv, way.env, err)
			case !c.shown && (!isKF || kf.Value != c.value || strings.Contains(err.Error(), c.value) || !strings.HasPrefix(err.Error(), way.from+": no such file (the value is not shown")):
				t.Errorf("%q %q: %v, want %s: no such file, the value not shown (a KeyNotFileError with it)", way.argv, way.env, err, way.from)
			}
		}
		if got := ClearlyPath(c.value); got != c.shown {
			t.Errorf("ClearlyPath(%q) = %v, want %v", c.value, got, c.shown)
		}
	}
}

// Keys reads a key file named more than once, by flags or a variable,
// once, and gives its keys once.
func TestKeysReadsEachFileOnce(t *testing.T) {
	reads := map[string]int{}
	read := func(p string) ([]byte, error) {
		reads[p]++
		return []byte("key-of-" + p + "\n"), nil
	}
	argv := []string{"--api-key-file", "/a", "--api-key-file=/a", "--api-key-file", "/b", "--api-key-file", "/a"}
	got, err := Keys(llamaSpec, argv, []string{"LLAMA_ARG_API_KEY_FILE=/b"}, read)
	if err != nil || !slices.Equal(got, []string{"key-of-/a", "key-of-/b"}) {
		t.Errorf("Keys = %q, %v", got, err)
	}
	if want := map[string]int{"/a": 1, "/b": 1}; !maps.Equal(reads, want) {
		t.Errorf("reads %v, want %v", reads, want)
	}
}

// A Redactor holds each value once however often it is added (the same
// key file's 116,508 keys, added at each seeding and build, were compared
// with every one known: minutes), longest first.
func TestRedactorAddsEachOnce(t *testing.T) {
	var r Redactor
	for range 3 {
		r.Add("sk-0123456789", `we"ird-0000`, "sk-0123456789-longer")
	}
	want := []string{"sk-0123456789-longer", "sk-0123456789", "we%22ird-0000", `we\"ird-0000`, `we"ird-0000`} // %22: in a logged URL
	var got []string
	for _, o := range r.olds {
		got = append(got, string(o))
	}
	if !slices.Equal(got, want) {
		t.Errorf("olds = %q, want %q", got, want)
	}
	if s := r.String(`sk-0123456789-longer we"ird-0000`); s != "****nger ****0000" {
		t.Errorf("String = %q", s)
	}
}

func TestRedactor(t *testing.T) {
	var r Redactor
	r.Add("sk-0123456789", "short", `we"ird\key-0000`, "sk-0123456789-longer")
	for _, c := range []struct{ in, want string }{
		{"cmd=llama-server --api-key sk-0123456789 --port 1", "cmd=llama-server --api-key ****6789 --port 1"},
		{"both sk-0123456789-longer and sk-0123456789", "both ****nger and ****6789"},
		{"short stays", "short stays"}, // under MinRedact
		{`{"v":"we\"ird\\key-0000"}`, `{"v":"****0000"}`},
		{"nothing here", "nothing here"},
	} {
		if got := r.String(c.in); got != c.want {
			t.Errorf("String(%q) = %q, want %q", c.in, got, c.want)
		}
		if got := string(r.Bytes([]byte(c.in))); got != c.want {
			t.Errorf("Bytes(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	var buf bytes.Buffer
	w := r.Writer(&buf)
	n, err := w.Write([]byte("key sk-0123456789\n"))
	if err != nil || n != len("key sk-0123456789\n") || buf.String() != "key ****6789\n" {
		t.Errorf("Writer: n=%d err=%v wrote %q", n, err, buf.String())
	}
	var nilR *Redactor
	nilR.Add("sk-0123456789")
	if nilR.String("sk-0123456789") != "sk-0123456789" {
		t.Error("a nil Redactor changed text")
	}
}

func TestBearerAndAuthorized(t *testing.T) {
	keys := []string{"sk-first-0001", "sk-second-0002"}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !Authorized(r, keys) {
			w.WriteHeader(http.StatusUnauthorized)
			w.Write([]byte(UnauthorizedBody))
			return
		}
		w.Write([]byte("ok"))
	}))
	defer srv.Close()
	get := func(c *http.Client, hdr map[string]string) int {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/slots", nil)
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if req.Header.Get("Authorization") != hdr["Authorization"] {
			t.Errorf("the transport changed the caller's request")
		}
		return resp.StatusCode
	}
	for _, c := range []struct {
		name string
		c    *http.Client
		hdr  map[string]string
		want int
	}{
		{"bearer client", Client(nil, Static("sk-second-0002")), nil, 200},
		{"no key", &http.Client{}, nil, 401},
		{"empty key adds nothing", Client(nil, Static("")), nil, 401},
		{"wrong key", Client(nil, Static("sk-wrong")), nil, 401},
		{"raw Authorization", &http.Client{}, map[string]string{"Authorization": "sk-first-0001"}, 200},
		{"X-Api-Key", &http.Client{}, map[string]string{"X-Api-Key": "sk-first-0001"}, 200},
		{"caller's header kept", Client(nil, Static("sk-first-0001")), map[string]string{"Authorization": "Bearer sk-wrong"}, 401},
		{"lowercase bearer is not stripped", &http.Client{}, map[string]string{"Authorization": "bearer sk-first-0001"}, 401},
	} {
		if got := get(c.c, c.hdr); got != c.want {
			t.Errorf("%s: HTTP %d, want %d", c.name, got, c.want)
		}
	}
	if !Authorized(httptest.NewRequest(http.MethodGet, "/x", nil), nil) {
		t.Error("no keys must mean open")
	}
}

// TestSecretFlagsCoverLlamaServer: every secret flag llama-server lists is
// one of secretFlags (or its short -hft), so its typos are masked too; and
// no other flag it lists is taken for a typo of one.
func TestSecretFlagsCoverLlamaServer(t *testing.T) {
	for _, f := range llamaflags.All() {
		n := strings.ToUpper(strings.TrimLeft(f, "-"))
		exact := secretName(flagParts(n)) || n == "HFT"
		if v, _ := llamaflags.Values(f); exact && v > 0 && n != "HFT" && !slices.Contains(secretFlags, n) {
			t.Errorf("llama-server's secret flag %s is not in secretFlags", f)
		}
		if !exact && nearSecretFlag(n) {
			t.Errorf("llama-server's %s would be taken for a typo of a secret flag", f)
		}
	}
}

// Unknown flags named like a secret (--auth, --bearer, -k) have their
// values masked in the listing and given to the Redactor, as a variable
// ending in _AUTH has.
func TestMaskArgvSecretNamedFlags(t *testing.T) {
	argv := []string{"llama-server", "--auth", "SECRETKEY123456", "-k", "SECRETKEY1234567", "--bearer=SECRETKEY12345678", "--top-k", "40"}
	want := []string{"llama-server", "--auth", "****3456", "-k", "****4567", "--bearer=****5678", "--top-k", "40"}
	if got := MaskArgv(argv); !slices.Equal(got, want) {
		t.Errorf("MaskArgv = %q, want %q", got, want)
	}
	if got, want := ArgvValues(argv), []string{"SECRETKEY123456", "SECRETKEY1234567", "SECRETKEY12345678"}; !slices.Equal(got, want) {
		t.Errorf("ArgvValues = %q, want %q", got, want)
	}
}

// A switch takes no value, so the argument after it is its own: a flag
// llama-server lists as taking none (--cors-credentials, named as a
// credential) and a negation (--no-auth, --disable-auth). Before, the
// argument after each was masked and given to the Redactor, which then
// masked it (a model's path) wherever it showed.
func TestSwitchesTakeNoValue(t *testing.T) {
	argv := []string{"llama-server", "--cors-credentials", "-m", "models/target-q4.gguf", "--no-auth", "-a", "my-model-alias",
		"--disable-auth", "-c", "4096", "--auth", "SECRETKEY123456"}
	want := slices.Clone(argv)
	want[len(want)-1] = "****3456"
	if got := MaskArgv(argv); !slices.Equal(got, want) {
		t.Errorf("MaskArgv = %q, want %q", got, want)
	}
	if got := ArgvValues(argv); !slices.Equal(got, []string{"SECRETKEY123456"}) {
		t.Errorf("ArgvValues = %q, want the --auth value alone", got)
	}
}

func TestArgvValues(t *testing.T) {
	got := ArgvValues([]string{"--port", "1", "--api-kye", "K1", "--hf-tokne=K2", "--api-key-file", "f", "--api-key = K3 K4", "--api-key=--api-key", "K5"})
	if !slices.Equal(got, []string{"K1", "K2", "K3", "K4", "K5"}) {
		t.Errorf("ArgvValues = %q", got)
	}
}

// JoinedFlag finds a secret flag and its value given as one argument,
// whatever whitespace or "=" with spaces joins them, by SecretFlag's
// names; the flag's own form "--flag=V" and flags that take no secret are
// not joined ones.
func TestJoinedFlag(t *testing.T) {
	for _, c := range []struct {
		arg  string
		name string // "" = not joined
		vals []string
	}{
		{"--api-key K1", "--api-key", []string{"K1"}},
		{"--api-key = K1", "--api-key", []string{"K1"}},
		{"--api-key =K1", "--api-key", []string{"K1"}},
		{"--api-key\tK1", "--api-key", []string{"K1"}},
		{" --api-key K1 ", "--api-key", []string{"K1"}},
		{"--api-key K1 K2", "--api-key", []string{"K1", "K2"}},
		{"--api-key ", "", nil}, // the key is the next item: a flag, not joined
		{"--hf-token hf_abc", "--hf-token", []string{"hf_abc"}},
		{"-hft T", "-hft", []string{"T"}},
		{"--API-KEY K1", "--API-KEY", []string{"K1"}},
		{"--api_key K1", "--api_key", []string{"K1"}},
		{"--auth K1", "--auth", []string{"K1"}},
		{"--api-key\u200bK1", "--api-key", []string{"K1"}},
		{"--api-key\ufeffK1", "--api-key", []string{"K1"}},
		{"--api-key\u2060\u00a0K1", "--api-key", []string{"K1"}},
		{"\u200b--api-key K1", "--api-key", []string{"K1"}},
		{"--hf_tok T", "--hf_tok", []string{"T"}}, // a typo of a listed flag
		{"--api-key=K1 K2", "", nil},
		{"--api-key", "", nil},
		{"--api-key-file /a b", "", nil},
		{"--no-auth x", "", nil},
		{"--cors-credentials x", "", nil},
		{"--alias my model", "", nil},
		{"api-key K1", "", nil},
	} {
		name, vals, ok := JoinedFlag(c.arg)
		if ok != (c.name != "") || name != c.name || !slices.Equal(vals, c.vals) {
			t.Errorf("JoinedFlag(%q) = %q, %q, %v; want %q, %q", c.arg, name, vals, ok, c.name, c.vals)
		}
	}
}

// ListedFlag: the secret flags the engines list and their typos, not a
// flag secret by its words only.
func TestListedFlag(t *testing.T) {
	for _, c := range []struct {
		name string
		want bool
	}{
		{"--api-key", true}, {"--API-KEY", true}, {"--api_key", true}, {"--api-kye", true},
		{"--hf-token", true}, {"-hft", true}, {"--admin-api-key", true},
		{"--eos-token", false}, {"--auth", false}, {"-k", false}, {"--api-key-file", false}, {"api-key", false},
		{"--api-key\u200b", true}, {"\u200b--api-key", true}, {" --hf-token ", true}, {"\u2060-hft", true},
		{"\u200b--eos-token", false}, {"--no-api-key", false}, {"--hf_tok", true},
	} {
		if got := ListedFlag(c.name); got != c.want {
			t.Errorf("ListedFlag(%q) = %v, want %v", c.name, got, c.want)
		}
		if c.want && !SecretFlag(c.name) {
			t.Errorf("ListedFlag(%q), but not SecretFlag: a value joined to it would not be masked", c.name)
		}
	}
}

// TrimFlag strips white space and invisible characters around a flag's
// name; spaced only where none is left within (a joined argument is not).
func TestTrimFlag(t *testing.T) {
	for _, c := range []struct {
		in, bare string
		spaced   bool
	}{
		{"--api-key", "--api-key", false},
		{"--api-key ", "--api-key", true},
		{"--api-key\u200b", "--api-key", true},
		{"\ufeff--api-key\u2060", "--api-key", true},
		{"\t-hft", "-hft", true},
		{" --api-key K ", "--api-key K", false},
		{"--api-key\u200bK", "--api-key\u200bK", false},
		{"", "", false},
	} {
		if bare, spaced := TrimFlag(c.in); bare != c.bare || spaced != c.spaced {
			t.Errorf("TrimFlag(%q) = %q, %v; want %q, %v", c.in, bare, spaced, c.bare, c.spaced)
		}
	}
}

// TakeKeyFlags reads key flags as Keys does, and leaves argv whole when a
// key flag has no value (Keys then refuses it).
func TestTakeKeyFlags(t *testing.T) {
	llama := Spec{Flags: []string{"--api-key"}, Split: true}
	vllm := Spec{Flags: []string{"--api-key"}, Multi: true}
	for _, c := range []struct {
		sp         Spec
		argv, rest []string
		vals       []string
		ok         bool
	}{
		{llama, []string{"-ngl", "99", "--api-key", "a,b", "-c", "1"}, []string{"-ngl", "99", "-c", "1"}, []string{"a,b"}, true},
		{llama, []string{"--api-key=a", "--api-key", "b"}, nil, []string{"a", "b"}, true},
		{llama, []string{"--api-key-file", "f"}, []string{"--api-key-file", "f"}, nil, true},
		{vllm, []string{"--api-key", "a", "b", "--x"}, []string{"--x"}, []string{"a", "b"}, true},
		{llama, []string{"-c", "1", "--api-key"}, []string{"-c", "1", "--api-key"}, nil, false},
		{llama, []string{"--api-key=,", "-c"}, []string{"--api-key=,", "-c"}, nil, false},
		// The flag twice: the second is no key, and the key after it
		// would be left a plain argument (a campaign).
		{llama, []string{"--api-key", "--api-key", "K"}, []string{"--api-key", "--api-key", "K"}, nil, false},
		{Spec{Flags: []string{"--api-key"}, FileFlags: []string{"--api-key-file"}}, []string{"--api-key", "--api-key-file=f"}, []string{"--api-key", "--api-key-file=f"}, nil, false},
		{llama, []string{"--api-key=--api-key", "K"}, []string{"--api-key=--api-key", "K"}, nil, false},
	} {
		rest, vals, ok := TakeKeyFlags(c.sp, c.argv)
		if !slices.Equal(rest, c.rest) || !slices.Equal(vals, c.vals) || ok != c.ok {
			t.Errorf("TakeKeyFlags(%q) = %q, %q, %v; want %q, %q, %v", c.argv, rest, vals, ok, c.rest, c.vals, c.ok)
		}
	}
}

// A variable that names an engine's API key but that the engine does not
// read leaves it open: it is named, so that a warning can say so.
func TestUnreadKeyVar(t *testing.T) {
	for _, c := range []struct {
		env  []string
		want string
	}{
		{[]string{"LLAMA_ARG_API_KEY=k"}, "LLAMA_ARG_API_KEY"},
		{[]string{"PATH=/bin", "MLXCEL_API_KEY=k"}, "MLXCEL_API_KEY"},
		{[]string{"LLAMA_API_KYE=k"}, "LLAMA_API_KYE"},
		{[]string{"LLAMA_ARG_API_KEY_FIEL=/k"}, "LLAMA_ARG_API_KEY_FIEL"},
		{[]string{"LLAMA_API_KEY=k"}, ""},           // read
		{[]string{"LLAMA_ARG_API_KEY_FILE=/k"}, ""}, // read
		{[]string{"LLAMA_ARG_API_KEY="}, ""},        // unset
		{[]string{"LLAMA_ARG_HF_TOKEN=t"}, ""},      // a download token
		{[]string{"OPENAI_API_KEY=k"}, ""},          // not an engine's
		{[]string{"LLAMA_ARG_N_PREDICT=5"}, ""},
		// A key file's variable misspelt: the engine reads no key from
		// it (a hostile round saw these pass unwarned).
		{[]string{"LLAMA_ARG_APIKEYFILE=/k"}, "LLAMA_ARG_APIKEYFILE"},
		{[]string{"LLAMA_ARG_API_KEYFILE=/k"}, "LLAMA_ARG_API_KEYFILE"},
		{[]string{"LLAMA_ARG_APIKEY_FILE=/k"}, "LLAMA_ARG_APIKEY_FILE"},
		{[]string{"LLAMA_ARG_API_KEY_PATH=/k"}, "LLAMA_ARG_API_KEY_PATH"},
		{[]string{"LLAMA_ARG_API_KEY_FILENAME=/k"}, "LLAMA_ARG_API_KEY_FILENAME"},
		{[]string{"llama_arg_api_key_file=/k"}, "llama_arg_api_key_file"}, // names are case-sensitive
		{[]string{"Llama_Api_Key=k"}, "Llama_Api_Key"},
		{[]string{"LLAMA_ARG_SSL_KEY_FILE=/k"}, ""}, // another file
		{[]string{"LLAMA_ARG_MODEL_PATH=/m"}, ""},
	} {
		if got := UnreadKeyVar(llamaSpec, c.env); got != c.want {
			t.Errorf("UnreadKeyVar(%q) = %q, want %q", c.env, got, c.want)
		}
	}
}

// A secret under an innocuous name is judged by its value's shape: an
// Authorization value, a token with a provider's prefix, a URL's
// password. Only the secret part is masked; the rest stays readable, and
// ordinary values are left whole (the negatives below).
func TestMaskByValue(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"Bearer tok-SECRET-5555", "Bearer ****5555"},
		{"Basic dXNlcjpwYXNzd29yZA==", "Basic ****ZA=="},
		{"token abcdef123456", "token ****3456"},
		{"Bearer abc", "Bearer ****"},
		{"postgres://u:pw-SECRET-77@h/db", "postgres://u:****T-77@h/db"},
		{"redis://:hunter2-pw@cache:6379/0", "redis://:****2-pw@cache:6379/0"},
		{"https://user:p@ss-9999@example.com/x", "https://user:****9999@example.com/x"},
		{"ghp_SECRET2222", "****2222"},
		{"gho_0123456789abcdef", "****cdef"},
		{"github_pat_11ABCDEFG0123456789_abcdefghij", "****ghij"},
		{"sk-SECRET7777", "****7777"},
		{"sk_live_0123456789abcdef", "****cdef"},
		{"sk-proj-AbCdEf012345", "****2345"},
		{"hf_AbCdEfGhIjKlMnOpQrStUvWxYz012345", "****2345"},
		{"xoxb-1234567890-abcdefgh", "****efgh"},
		{"xoxp-1234567890-abcdefgh", "****efgh"},
		{"AKIAIOSFODNN7EXAMPLE", "****MPLE"},
		{"glpat-AbCdEf0123456789xyz", "****9xyz"},
		{"AIzaSyA-0123456789abcdefghijklmnopqrstu", "****rstu"},
		{"eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJl", "****dXJl"},
		{"a=1,key=sk-SECRET7777;b", "a=1,key=****7777;b"},
		// Ordinary values stay readable.
		{"info", "info"},
		{"0,1", "0,1"},
		{"8080", "8080"},
		{"/models/llama-3-8b.gguf", "/models/llama-3-8b.gguf"},
		{"/data/hf_models/llama", "/data/hf_models/llama"},
		{"hf_transfer", "hf_transfer"},
		{"sk-learn", "sk-learn"},
		{"Token budget", "Token budget"}, // words after Basic or Token
		{"Basic mode", "Basic mode"},
		{"/models/hf_Llama3-8B-Instruct/model.gguf", "/models/hf_Llama3-8B-Instruct/model.gguf"}, // a name in a path
		{"/loras/sk-Fantasy2024v3.gguf", "/loras/sk-Fantasy2024v3.gguf"},
		{"task-0123456789", "task-0123456789"},
		{"desk-AbCdEf012345", "desk-AbCdEf012345"},
		{"AKIAIOSFODNN7EXAMPLEX", "AKIAIOSFODNN7EXAMPLEX"}, // 17 after AKIA: not a key id
		{"api.example.com", "api.example.com"},
		{"https://example.com:8443/v1", "https://example.com:8443/v1"},
		{"https://user@example.com/v1", "https://user@example.com/v1"},
		{"postgres://h:5432/db", "postgres://h:5432/db"},
		{"Bearer", "Bearer"},
		{"Basic math tutor", "Basic math tutor"},
		{"eyJhbGciOiJIUzI1NiJ9", "eyJhbGciOiJIUzI1NiJ9"}, // one segment: not a JWT
		{"", ""},
	} {
		if got := MaskEnv([]string{"FOO=" + c.in}); got[0] != "FOO="+c.want {
			t.Errorf("MaskEnv(FOO=%q) = %q, want FOO=%q", c.in, got[0], c.want)
		}
		if got := MaskEnvMap(map[string]string{"FOO": c.in}); got["FOO"] != c.want {
			t.Errorf("MaskEnvMap(FOO=%q) = %q, want %q", c.in, got["FOO"], c.want)
		}
		if got := MaskArgv([]string{"--x", c.in}); got[1] != c.want {
			t.Errorf("MaskArgv(--x %q) = %q, want %q", c.in, got[1], c.want)
		}
	}
}

// An argument can carry a header: its credential is masked, the header's
// name and scheme stay readable.
func TestMaskArgvHeader(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"Authorization: Bearer tok-SECRET-5555", "Authorization: Bearer ****5555"},
		{"authorization:Basic dXNlcjpwYXNz", "authorization:Basic ****YXNz"},
		{"Proxy-Authorization: raw-credential-1234", "Proxy-Authorization: ****1234"},
		{"X-Api-Key: my-key-0000", "X-Api-Key: ****0000"},
		{`{"Authorization": "Bearer tok-SECRET-5555"}`, `{"Authorization": "Bearer ****5555"}`},
		{"Content-Type: application/json", "Content-Type: application/json"},
		// curl's -H glued to the header's name
		{"-HAuthorization: Bearer tok-SECRET-5555", "-HAuthorization: Bearer ****5555"},
		{"-Hapi-key: my-key-SECRET-0000", "-Hapi-key: ****0000"},
		{"-HX-Api-Key: my-key-SECRET-0000", "-HX-Api-Key: ****0000"},
	} {
		if got := MaskArgv([]string{"--header", c.in}); got[1] != c.want {
			t.Errorf("MaskArgv(--header %q) = %q, want %q", c.in, got[1], c.want)
		}
	}
}

// A credential header given in parts, as curl's habits split it (after
// --, or a profile's args): its value, after a scheme word, is masked and
// given to the Redactor; before, "-HAuthorization:" "Bearer" "K" showed K.
func TestMaskArgvHeaderInParts(t *testing.T) {
	for _, c := range []struct{ in, want []string }{
		{[]string{"-HAuthorization:", "Bearer", "SKSECRET123", "--port", "1"}, []string{"-HAuthorization:", "Bearer", "****T123", "--port", "1"}},
		{[]string{"-H", "X-Api-Key:", "SKSECRET123"}, []string{"-H", "X-Api-Key:", "****T123"}},
		{[]string{"-Hapi-key:", "SKSECRET123"}, []string{"-Hapi-key:", "****T123"}},
		{[]string{"Authorization:", "Basic", "dXNlcjpwYXNz"}, []string{"Authorization:", "Basic", "****YXNz"}},
		{[]string{"-HAuthorization:", "--port", "1"}, []string{"-HAuthorization:", "--port", "1"}},
		{[]string{"-HContent-Type:", "application/json"}, []string{"-HContent-Type:", "application/json"}},
		{[]string{"-H", "Authorization: Bearer", "SKSECRET123"}, []string{"-H", "Authorization: Bearer", "****T123"}},
		// curl's -u user:password, and a session cookie
		{[]string{"-u", "user:abcdef123456SECRET"}, []string{"-u", "****CRET"}},
		{[]string{"--user", "user:abcdef123456SECRET", "-ub", "512"}, []string{"--user", "****CRET", "-ub", "512"}},
		{[]string{"-H", "Cookie: session=abcdef123456SECRET"}, []string{"-H", "Cookie: ****CRET"}},
		{[]string{"-HCookie:", "session=abcdef123456SECRET"}, []string{"-HCookie:", "****CRET"}},
		// every pair of a cookie, and curl's glued and = forms
		{[]string{"-H", "Cookie: a=1; sid=SEKRETzz9876"}, []string{"-H", "Cookie: ****9876"}},
		{[]string{"-H", "Cookie:sid=SEKRETzz9876;other=SEKRETzz9876"}, []string{"-H", "Cookie:****9876"}},
		{[]string{"-uuser:SEKRETzz9876"}, []string{"-u****9876"}},
		{[]string{"--user=u:SEKRETzz9876"}, []string{"--user=****9876"}},
		{[]string{"-b", "session=SEKRETzz9876"}, []string{"-b", "****9876"}},
		{[]string{"--cookie=session=SEKRETzz9876"}, []string{"--cookie=****9876"}},
		{[]string{"-H", "X-Auth-Token: SEKRETzz9876"}, []string{"-H", "X-Auth-Token: ****9876"}},
		// a leak hunt: quoted values, a value cut at a comma, more names
		{[]string{"-H", `Cookie: sid="SEKRETzz9876"`}, []string{"-H", `Cookie: ****876"`}},
		{[]string{"-H", `Cookie: a="1"; sid=SEKRETzz9876`}, []string{"-H", `Cookie: ****9876`}},
		{[]string{"-H", `Authorization: Bearer "SEKRETzz9876"`}, []string{"-H", `Authorization: Bearer "****9876"`}},
		{[]string{"-H", "Authorization: Bearer abc,SEKRETzz9876"}, []string{"-H", "Authorization: Bearer ****9876"}},
		{[]string{"-H", "apikey: SEKRETzz9876"}, []string{"-H", "apikey: ****9876"}},
		{[]string{"-H", "Cookie: ;sid=SEKRETzz9876"}, []string{"-H", "Cookie: ****9876"}},
		{[]string{"-H", "Authorization: Bot SEKRETzz9876"}, []string{"-H", "Authorization: Bot ****9876"}},
		{[]string{"-H", "Authorization: OAuth SEKRETzz9876"}, []string{"-H", "Authorization: OAuth ****9876"}},
		{[]string{"-H", "Authorization: ApiKey SEKRETzz9876"}, []string{"-H", "Authorization: ApiKey ****9876"}},
		{[]string{"-H", "X_API_KEY: SEKRETzz9876"}, []string{"-H", "X_API_KEY: ****9876"}},
		{[]string{"-H", "PRIVATE-TOKEN: SEKRETzz9876"}, []string{"-H", "PRIVATE-TOKEN: ****9876"}},
		{[]string{"-H", "Ocp-Apim-Subscription-Key: SEKRETzz9876"}, []string{"-H", "Ocp-Apim-Subscription-Key: ****9876"}},
		{[]string{"-H", "Authorization: raw-SECRET-1234", "words"}, []string{"-H", "Authorization: ****1234", "words"}},
	} {
		if got := MaskArgv(c.in); !slices.Equal(got, c.want) {
			t.Errorf("MaskArgv(%q) = %q, want %q", c.in, got, c.want)
		}
		// What is masked goes to the Redactor, and nothing the output shows.
		vals, shown := ArgvValues(c.in), strings.Join(c.want, " ")
		if !slices.Equal(c.in, c.want) && len(vals) == 0 || slices.ContainsFunc(vals, func(v string) bool { return strings.Contains(shown, v) }) {
			t.Errorf("ArgvValues(%q) = %q: the masked values, and nothing shown", c.in, vals)
		}
	}
}

// The Redactor hears of secrets judged by value too, so that an engine
// echoing one back does not print it.
func TestValuesByShape(t *testing.T) {
	env := []string{"FOO=sk-SECRET7777", "DB_URL=postgres://u:pw-SECRET-77@h/db", "HDR=Bearer tok-SECRET-5555", "PORT=8080"}
	if got, want := EnvValues(env), []string{"pw-SECRET-77", "sk-SECRET7777", "tok-SECRET-5555"}; !slices.Equal(got, want) {
		t.Errorf("EnvValues = %q, want %q", got, want)
	}
	argv := []string{"--header", "Authorization: Bearer tok-SECRET-5555", "--api-key", "K1", "-m", "/m/hf_models/x"}
	if got, want := ArgvValues(argv), []string{"tok-SECRET-5555", "K1"}; !slices.Equal(got, want) {
		t.Errorf("ArgvValues = %q, want %q", got, want)
	}
}

// Masking by shape replaces a header's credential, never the prose after
// a flag's name: engine/passthrough.go's refusal of a misspelt key flag
// said "Spell it --api-key: **** given" (the header rule read "--api-key:"
// as a header and "as" as its value). A short word after a header with no
// scheme is prose as well; a value after a scheme is a credential.
func TestMaskLeavesProse(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"engine argument is a misspelt key flag: --api-kye ****3456 is not a flag the engine (llama.cpp) knows; did you mean --api-key? Spell it --api-key: as given, the engine refuses to start on the unknown flag, and the key would be on its command line as a plain argument",
			"engine argument is a misspelt key flag: --api-kye ****3456 is not a flag the engine (llama.cpp) knows; did you mean --api-key? Spell it --api-key: as given, the engine refuses to start on the unknown flag, and the key would be on its command line as a plain argument"},
		{"Spell it --admin-api-key: otherwise refused", "Spell it --admin-api-key: otherwise refused"},
		// One dash is a flag's name too: "unknown flag -api-key: ****ther a
		// speclaunch flag" (a new-operator campaign).
		{"unknown flag -api-key: neither a speclaunch flag nor one llama-server lists", "unknown flag -api-key: neither a speclaunch flag nor one llama-server lists"},
		// And with another dash (a recheck: "-—api-key: ****ther").
		{"unknown flag -\u2014api-key: neither a speclaunch flag nor one llama-server lists", "unknown flag -\u2014api-key: neither a speclaunch flag nor one llama-server lists"},
		// curl's glued -H is a header, and a scheme's value is a credential
		// after any name (the one-dash rule first let both through whole).
		{"unknown flag -HX-Api-Key: Zq9abcdefgh12345: neither", "unknown flag -HX-Api-Key: ****2345: neither"},
		{"x -Authorization: Bearer Zq9abcdefgh12345", "x -Authorization: Bearer ****2345"},
		{"curl -HX-API-KEY: Zq9abcdefgh12345", "curl -HX-API-KEY: ****2345"},
		{"curl -HProxy-Authorization: Zq9abcdefgh12345", "curl -HProxy-Authorization: ****2345"},
		// The glued header named back with the message's own colon: the
		// colon is no credential (it read "-HX-Api-Key:**** neither").
		{"unknown flag -HX-Api-Key:: neither a speclaunch flag", "unknown flag -HX-Api-Key:: neither a speclaunch flag"},
		{"unknown flag -HAuthorization:: neither", "unknown flag -HAuthorization:: neither"},
		{"unknown flag -HAuthorization: Bearer SKSECRET123: neither", "unknown flag -HAuthorization: Bearer ****T123: neither"},
		{`engine argument "Authorization: Bearer": it is`, `engine argument "Authorization: Bearer": it is`},
		// a cookie in a message masks its value, not the rest of the message
		{"unknown flag -HCookie: 1a: neither a speclaunch flag", "unknown flag -HCookie: ****: neither a speclaunch flag"},
		{"unknown flag --api_key: neither a speclaunch flag", "unknown flag --api_key: neither a speclaunch flag"},
		// A value glued to the colon is the flag's, whatever the case (it
		// was printed whole once prose took any case).
		{"--API-KEY:Zq9abcdefgh12345", "--API-KEY:****2345"},
		{"-API-KEY:Zq9abcdefgh12345", "-API-KEY:****2345"},
		{"--Api-Key:Zq9abcdefgh12345", "--Api-Key:****2345"},
		{"--api-key:Zq9abcdefgh12345", "--api-key:****2345"},
		// A flag's name is prose whatever its case: "unknown flag
		// --API-KEY: ****ther a speclaunch flag" (a tester's pass).
		{"unknown flag --API-KEY: neither a speclaunch flag nor one llama-server lists", "unknown flag --API-KEY: neither a speclaunch flag nor one llama-server lists"},
		{"unknown flag --Api-Key: neither a speclaunch flag", "unknown flag --Api-Key: neither a speclaunch flag"},
		{"unknown flag -API-KEY: neither a speclaunch flag", "unknown flag -API-KEY: neither a speclaunch flag"},
		{"Spell it --ADMIN-API-KEY: otherwise refused", "Spell it --ADMIN-API-KEY: otherwise refused"},
		// Its value is masked as ever: after "=" or a space, not a colon.
		{"--API-KEY=Zq9abcdefgh12345", "--API-KEY=****2345"},
		{"--Api-Key: Bearer Zq9abcdefgh12345", "--Api-Key: Bearer ****2345"},
		{"--api-key: Bearer Zq9abcdefgh12345", "--api-key: Bearer ****2345"},
		{"api-key: as", "api-key: as"},
		{"X-Api-Key: abc", "X-Api-Key: abc"},
		// Credentials still masked.
		{"X-Api-Key: secretword", "X-Api-Key: ****word"},
		{"X-Api-Key: ab12", "X-Api-Key: ****"},
		{"Authorization: Bearer abc", "Authorization: Bearer ****"},
		{"run with --api-key=sk-live-0123456789", "run with --api-key=****6789"},
		{"X-Api-Key: my-key-0000", "X-Api-Key: ****0000"},
	} {
		if got := MaskValue(c.in); got != c.want {
			t.Errorf("MaskValue(%q)\n = %q\nwant %q", c.in, got, c.want)
		}
	}
}

// A credential as curl takes it is told apart from flags and values.
func TestCredentialHeader(t *testing.T) {
	for _, c := range []struct {
		argv []string
		i    int
		want bool
	}{
		{[]string{"-H", "X-Api-Key: abcdef123456SECRET"}, 1, true},
		{[]string{"-HAuthorization: Bearer abcdef123456SECRET"}, 0, true},
		{[]string{"-HAuthorization:", "Bearer", "abcdef123456SECRET"}, 0, true},
		{[]string{"-u", "user:abcdef123456SECRET"}, 0, true},
		{[]string{"-H", "Cookie: session=abcdef123456SECRET"}, 1, true},
		{[]string{"-HAuthorization:", "--port", "1"}, 0, false},
		{[]string{"--api-key=abcdef123456SECRET"}, 0, false}, // the key flags' own rules
		{[]string{"--api-key", "abcdef123456SECRET"}, 0, false},
		{[]string{"-H", "Content-Type: application/json"}, 1, false},
		{[]string{"-u", "512"}, 0, false},
		{[]string{"-m", "/models/api-key-notes.gguf"}, 1, false},
		// curl's other forms (a recheck), and lookalikes that are not
		{[]string{"-uuser:abcdef123456SECRET"}, 0, true},
		{[]string{"--user=u:abcdef123456SECRET"}, 0, true},
		{[]string{"-b", "session=abcdef123456SECRET"}, 0, true},
		{[]string{"--cookie=session=abcdef123456SECRET"}, 0, true},
		{[]string{"--header=Authorization: Bearer abcdef123456SECRET"}, 0, true},
		{[]string{"-H", "X-Auth-Token: abcdef123456SECRET"}, 1, true},
		{[]string{"-H", "api_key: abcdef123456SECRET"}, 1, true},
		{[]string{"--alias", "Cookie:7b"}, 1, false},
		{[]string{"--alias", "Cookie: crumbs=9"}, 1, false},
		{[]string{"--override-kv", "api-key=str:x"}, 1, false},
		{[]string{"--lora", "cookie:1.0"}, 1, false},
		{[]string{"-ub", "512"}, 0, false},
		{[]string{"-b", "2048"}, 0, false}, // llama-server's --batch-size
		{[]string{"-b2048"}, 0, false},
		{[]string{"-b=2048"}, 0, false},
		{[]string{"-batch-size=2048"}, 0, false},
		{[]string{"-H"}, 0, false},
	} {
		if got := CredentialHeader(c.argv, c.i); got != c.want {
			t.Errorf("CredentialHeader(%q, %d) = %v, want %v", c.argv, c.i, got, c.want)
		}
	}
}

// Straddle moves a cut off any known key, so that pieces redacted one by
// one show none of it (a hostile-input campaign: a key cut at 64 KiB or
// across two reads showed in halves).
func TestStraddle(t *testing.T) {
	var r Redactor
	r.Add("Kq7ZpXw3mN8vLr2TzzQ9")
	for _, tc := range []struct {
		name string
		b    string
		cut  int
		want int
	}{
		{"no key", "hello world", 5, 5},
		{"key before the cut", "a=Kq7ZpXw3mN8vLr2TzzQ9 tail", 23, 23},
		{"key across the cut", "a=Kq7ZpXw3mN8vLr2TzzQ9 tail", 10, 2},
		{"key after the cut", "head a=Kq7ZpXw3mN8vLr2TzzQ9", 4, 4},
		{"key begun at the end of the read", "api_key=Kq7ZpX", 14, 8},
		{"its first byte at the end", "api_key=K", 9, 8},
		{"a prefix that is not the key", "api_key=Kq7Zx", 13, 13},
		{"cut at zero", "Kq7ZpXw3mN8vLr2TzzQ9", 0, 0},
		{"cut past the end", "abc", 9, 9},
	} {
		if got := r.Straddle([]byte(tc.b), tc.cut); got != tc.want {
			t.Errorf("%s: Straddle(%q, %d) = %d, want %d", tc.name, tc.b, tc.cut, got, tc.want)
		}
	}
	var none *Redactor
	if got := none.Straddle([]byte("abc"), 2); got != 2 {
		t.Errorf("nil Redactor: %d, want 2", got)
	}
}

// A key is redacted in the JSON forms encoders print it in: Go's
// json.Marshal, slog's and llama-server's (no <>& escapes: a recheck saw
// `s3cr\"et<value99` whole in --log-format json), Python's json.dumps
// (vLLM and SGLang: non-ASCII as \uXXXX).
func TestRedactorJSONForms(t *testing.T) {
	for _, tc := range []struct{ key, printed string }{
		{`s3cr"et<value99`, `{"msg":"invalid api key s3cr\"et<value99"}`},
		{`s3cr"et<value99`, `{"msg":"invalid api key s3cr\"et\u003cvalue99"}`},
		{`ab12cd"ef>gh34`, `"ab12cd\"ef>gh34"`},
		{"Kq7Zé漢p2Xw9Vt4Mn8R", `{"key": "Kq7Z\u00e9\u6f22p2Xw9Vt4Mn8R"}`},
		{`Kq7Z"p2<Xw9&Vt4\Mn8R`, `{"key": "Kq7Z\"p2<Xw9&Vt4\\Mn8R"}`},
		{"Kq7Z😀p2Xw9Vt4Mn8R", `"Kq7Z\ud83d\ude00p2Xw9Vt4Mn8R"`},
	} {
		var r Redactor
		r.Add(tc.key)
		if got := r.String(tc.printed); !strings.Contains(got, Mask(tc.key)) || strings.Contains(got, "Xw9") || strings.Contains(got, "value99\"") {
			t.Errorf("key %q printed as %s: redacted to %s", tc.key, tc.printed, got)
		}
	}
}

// What a second recheck printed whole: a key split by a colour code, a key
// an engine's own log cut short, and spellings other encoders use.
func TestRedactorOtherSpellings(t *testing.T) {
	const key = "sk-live-0123456789abcdefXYZ9"
	const b64 = "Ab/Cd+Ef=Gh0123456789xyz9" // openssl rand -base64: / + =
	for _, tc := range []struct {
		name, printed, want string
	}{
		{"a colour code inside", "key sk-li\x1b[31mve-0123456789abcdefXYZ9\x1b[0m ok", "key ****XYZ9 ok"},
		{"cut short at the end of the line", "prefix: sk-live-0123456789abcdefXY", "prefix: ****"},
		{"cut short before more text", "api_key=sk-live-0123456789ab… (cut)", "api_key=****… (cut)"},
		{"only its common start", "a sk-live- key", "a sk-live- key"},
		{"a short run of it", "sk-live-0123 is not half", "sk-live-0123 is not half"},
		{"whole beside a cut copy", key + " " + key[:20], "****XYZ9 ****"},
		{"its second half alone", "engine 1 | 6789abcdefXYZ9", "engine 1 | ****"},
		{"a short run of its end", "abcdefXYZ9 is not half", "abcdefXYZ9 is not half"},
		{"an escaped solidus", `{"k":"Ab\/Cd+Ef=Gh0123456789xyz9"}`, `{"k":"****xyz9"}`},
		{"URL-encoded", "GET /v1?key=Ab%2FCd%2BEf%3DGh0123456789xyz9 200", "GET /v1?key=****xyz9 200"},
		{"upper-case escapes", `"K\u00E9q7ZpXw3mN8vLr2"`, `"****Lr2"`},
	} {
		var r Redactor
		r.Add(key, b64, "Kéq7ZpXw3mN8vLr2")
		got := r.String(tc.printed)
		if tc.name == "upper-case escapes" {
			if strings.Contains(got, "q7ZpXw3m") {
				t.Errorf("%s: %q redacted to %q", tc.name, tc.printed, got)
			}
			continue
		}
		if got != tc.want {
			t.Errorf("%s: %q redacted to %q, want %q", tc.name, tc.printed, got, tc.want)
		}
	}
	var r Redactor
	r.Add(key)
	// Before Straddle, a run that may go on in the next read stays.
	if got := string(r.WholeOnly([]byte("api_key=sk-live-0123456789"))); got != "api_key=sk-live-0123456789" {
		t.Errorf("WholeOnly replaced a run the next read may complete: %q", got)
	}
}
