// Package secret keeps API keys and tokens out of everything speclaunch
// prints, and puts the engine's API key on speclaunch's own requests to it.
//
// Masking follows llama-server, which logs its key as "****" and the last 4
// characters (tools/server/server-http.cpp): Mask does the same, and masks
// a key of 4 characters or fewer completely. What is a secret is decided in
// one place each: SecretFlag for command-line flags (TrimFlag for what
// may sit around a flag's name, JoinedFlag for one given with its value as
// one argument), SecretEnv for
// environment variables, MaskValue for a value whatever its name; Keys reads an engine's keys from its argv,
// environment and key files; Redactor replaces secret values wherever they
// appear in free text; Bearer adds the key to outgoing requests and
// Authorized checks it on incoming ones.
package secret

import (
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/speclaunch/speclaunch/internal/llamaflags"
	"github.com/speclaunch/speclaunch/internal/typo"
)

// Masked is what a secret shows as, before its last 4 characters.
const Masked = "****"

// Mask renders a secret as llama-server logs its key: "****" and the last
// 4 characters; a secret of 4 characters or fewer shows as "****" alone.
func Mask(v string) string {
	r := []rune(v)
	if len(r) <= 4 {
		return Masked
	}
	return Masked + string(r[len(r)-4:])
}

// secretWords are the name parts (of a flag split on "-", of a variable
// split on "_") that say a value is a secret: HF_TOKEN, OPENAI_API_KEY,
// AWS_SECRET_ACCESS_KEY, --api-key, --hf-token. A part ending in one counts
// too (APIKEY, PGPASSWORD); TOKENS (a count) and TOKENIZER do not.
var secretWords = []string{"KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "CREDENTIALS"}

// pathWords end a name whose value is a path, not a secret
// (--api-key-file, LLAMA_ARG_SSL_KEY_FILE): the file's content may be
// secret, the path is not.
var pathWords = []string{"FILE", "PATH", "DIR"}

func secretParts(parts []string) bool {
	if len(parts) == 0 {
		return false
	}
	if slices.Contains(pathWords, parts[len(parts)-1]) {
		return false
	}
	for _, p := range parts {
		for _, w := range secretWords {
			if strings.HasSuffix(p, w) {
				return true
			}
		}
	}
	return false
}

// credentialWords are last parts of a name that say its value is a
// credential (GITHUB_PAT, PROXY_AUTH, DB_PASS, SSH_PRIVATE, --auth,
// --bearer, DATABASE_DSN, CERT_PEM). Not SESSION: a desktop's
// DESKTOP_SESSION=ubuntu made "ubuntu" a secret, masked in every path. Only a whole last part counts, and not for typos: PAT is one
// edit from PATH, AUTH from AUTO, and AUTH_MODE, COMPAT and BYPASS are not
// secrets.
var credentialWords = []string{"AUTH", "OAUTH", "AUTHORIZATION", "PAT", "PASS", "PASSPHRASE", "PRIVATE", "BEARER",
	"COOKIE", "JWT", "DSN", "SIGNATURE", "SAS", "PEM"}

// secretName reports whether the parts of a name (upper case: a
// variable's split on "_", a flag's on "-" and "_") say its value is a
// secret: a part that is or ends in KEY, TOKEN, SECRET, PASSWORD, PASSWD or
// CREDENTIAL(S), unless the name ends in FILE, PATH or DIR; or a last part
// AUTH, OAUTH, AUTHORIZATION, PAT, PASS, PASSPHRASE, PRIVATE, BEARER, COOKIE,
// JWT, DSN, SIGNATURE, SAS or PEM. The one rule SecretEnv and SecretFlag
// share, before their typos.
func secretName(parts []string) bool {
	return secretParts(parts) || len(parts) > 0 && slices.Contains(credentialWords, parts[len(parts)-1])
}

// SecretEnv reports whether an environment variable's name says its value
// is a secret: secretName of its parts (split on "_"), or a typo of a
// secret word or variable (nearSecretEnv). Case does not matter. A value
// can also be secret by its shape whatever its name (MaskValue).
func SecretEnv(name string) bool {
	n := strings.ToUpper(name)
	parts := strings.Split(n, "_")
	return secretName(parts) || nearSecretEnv(n, parts)
}

// secretEnvs are the variables the engines and speclaunch read a key or
// token from (docs/engines.md), the names a typo is compared with.
var secretEnvs = []string{"LLAMA_API_KEY", "LLAMA_ARG_API_KEY", "LLAMA_ARG_HF_TOKEN", "HF_TOKEN",
	"HUGGING_FACE_HUB_TOKEN", "MLXCEL_API_KEY", "VLLM_API_KEY", "SGLANG_API_KEY", "OPENAI_API_KEY"}

// nearSecretEnv reports whether a variable's name is a typo of a secret
// one: a part one edit from a secret word (API_KYE, API_KEYS, HF_TOKN,
// API_KE), or the whole name within 2 edits of a variable the engines read
// a key from (LLAMA_ARG_APIKE). Its value is what the operator meant as a
// key, so it is masked as one. TOKENS (a count) is not a typo of TOKEN,
// and a name ending in FILE, PATH or DIR is a path, as for the exact names.
func nearSecretEnv(n string, parts []string) bool {
	if slices.Contains(pathWords, parts[len(parts)-1]) {
		return false
	}
	for _, p := range parts {
		if len(p) < 2 || p == "TOKENS" {
			continue
		}
		for _, w := range secretWords {
			if typo.Distance(p, w) <= 1 {
				return true
			}
		}
	}
	for _, e := range secretEnvs {
		if typo.Distance(n, e) <= 2 {
			return true
		}
	}
	return false
}

// SecretFlag reports whether a command-line flag (with its dashes, without
// "=value") takes a secret: --api-key, --hf-token, -hft, --admin-api-key
// and their typos (ListedFlag); another whose name says so by the rule of
// variables (secretName: --auth, --bearer, --db-password) or -k; not
// --api-key-file, --ssl-key-file or --max-num-batched-tokens. A switch
// takes no value, so no secret, whatever its name (switchFlag:
// --cors-credentials, --no-auth, --disable-auth): the argument after it is
// its own. Case does not matter, nor joinSep characters around the name
// (TrimFlag).
func SecretFlag(name string) bool {
	n, ok := valueFlag(name)
	return ok && (listedName(n) || n == "K" || secretName(flagParts(n))) // -k for a key
}

// ListedFlag reports whether name is a secret flag an engine lists
// (secretFlags, -hft) or a typo of one (--api-kye, --API_KEY), not a
// flag secret only by the words in its name (--eos-token, --auth): a
// value joined to a listed one was meant as the engine's key. Every
// listed flag is a SecretFlag.
func ListedFlag(name string) bool {
	n, ok := valueFlag(name)
	return ok && listedName(n)
}

// valueFlag is name, bare (TrimFlag), in upper case without its dashes,
// and whether it is a flag that takes a value: the one reading of a name
// SecretFlag and ListedFlag share.
func valueFlag(name string) (n string, ok bool) {
	name, _ = TrimFlag(name)
	if plain, _, dashed := DashedKeyFlag(name); dashed {
		name = plain
	}
	if !strings.HasPrefix(name, "-") || switchFlag(name) {
		return "", false
	}
	return strings.ToUpper(strings.TrimLeft(name, "-")), true
}

// PlainDashes is argument a written with ASCII dashes where a flag's
// dashes, or the hyphens of its name, are of another kind: autocorrect
// turns "--" into an en or em dash (one such dash alone is "--"), and a
// paste brings minus signs, fullwidth and Unicode hyphens, mixed with
// ASCII ones ("—-api-key", "‐‐api‐key"). No engine reads it as a flag,
// but the value after it is the key all the same. r is the first dash of
// another kind; ok is false for any other argument, and for prose ("—
// API key").
func PlainDashes(a string) (plain string, r rune, ok bool) {
	isDash := func(c rune) bool { return c == '-' || otherDash(c) }
	rest := strings.TrimLeftFunc(a, isDash)
	lead := a[:len(a)-len(rest)]
	name, value := rest, ""
	if i := strings.IndexAny(rest, "=:"); i >= 0 {
		name, value = rest[:i], rest[i:]
	}
	i := strings.IndexFunc(lead+name, otherDash)
	if lead == "" || i < 0 {
		return a, 0, false
	}
	r, _ = utf8.DecodeRuneInString((lead + name)[i:])
	name = strings.Map(func(c rune) rune {
		if otherDash(c) {
			return '-'
		}
		return c
	}, name)
	if !flagShaped(name) {
		return a, 0, false
	}
	n := min(utf8.RuneCountInString(lead), 2)
	if first, _ := utf8.DecodeRuneInString(lead); n == 1 && (first == '\u2013' || first == '\u2014') {
		n = 2
	}
	return strings.Repeat("-", n) + name + value, r, true
}

// DashedKeyFlag is PlainDashes for an engine's key flag alone (--api-key,
// --hf-token and their typos: listedName): "—secret" or "—token" is a
// value's prose, and masking what followed it hid model names. The one
// reading of a dashed key flag that masking, the engine's argument check
// and the CLI's hint share.
func DashedKeyFlag(a string) (plain string, r rune, ok bool) {
	plain, r, ok = PlainDashes(a)
	n, _, _ := strings.Cut(plain, ":")
	if !ok || !listedName(strings.ToUpper(strings.TrimLeft(n, "-"))) {
		return a, 0, false
	}
	return plain, r, true
}

// flagShaped reports whether name, what follows a flag's dashes up to an
// "=" or ":", is a flag's name (a letter, then letters, digits, "-" and
// "_"): "— API key" or "—API KEY:" is prose, a value's, not a flag typed
// with another dash.
func flagShaped(name string) bool {
	if name == "" || !unicode.IsLetter(rune(name[0])) || name[0] >= utf8.RuneSelf {
		return false
	}
	return !strings.ContainsFunc(name, func(r rune) bool {
		return r != '-' && r != '_' && (r >= utf8.RuneSelf || !unicode.IsLetter(r) && !unicode.IsDigit(r))
	})
}

// otherDash reports whether r is a dash other than ASCII's "-": Unicode's
// dash punctuation (hyphen, en and em dash, fullwidth hyphen-minus) and
// the minus sign.
func otherDash(r rune) bool {
	switch r {
	case '-':
		return false
	case '\u2212', '\u02D7', '\u207B', '\u208B', '\u2043', '\u2796': // minus signs, modifier and super/subscript minus, hyphen bullet
		return true
	}
	return unicode.Is(unicode.Pd, r)
}

// listedName reports whether a flag's name (valueFlag's) is one of
// secretFlags, llama.cpp's short -hft, or a typo of one; "_" is "-", as
// vLLM and SGLang read it.
func listedName(n string) bool {
	return n == "HFT" || nearSecretFlag(strings.ReplaceAll(n, "_", "-"))
}

// TrimFlag is a flag's name with the joinSep characters around it
// stripped, as every rule of flags reads it: a pasted space or zero-width
// space beside "--api-key" hides the flag from the engine, not from
// masking. spaced reports that some were stripped and none is left within
// (" --api-key", "--api-key\u200b"); a name with one within is a joined
// argument, JoinedFlag's.
func TrimFlag(name string) (bare string, spaced bool) {
	bare = strings.TrimFunc(name, joinSep)
	return bare, bare != name && !strings.ContainsFunc(bare, joinSep)
}

// switchFlag reports whether a flag takes no value: llama-server lists it
// as taking none (internal/llamaflags: --cors-credentials,
// --no-cors-credentials), or its name's first part is NO or DISABLE, a
// switch turned off (--no-auth, --disable-auth). Case does not matter.
func switchFlag(name string) bool {
	lower := strings.ToLower(name)
	if v, ok := llamaflags.Values(lower); ok && v == 0 {
		return true
	}
	parts := flagParts(strings.ToUpper(strings.TrimLeft(name, "-")))
	return len(parts) > 1 && (parts[0] == "NO" || parts[0] == "DISABLE")
}

// flagParts are the parts of a flag's name (upper case, without dashes)
// split on "-" and "_" (--api_key is --api-key to vLLM and SGLang).
func flagParts(n string) []string {
	return strings.FieldsFunc(n, func(r rune) bool { return r == '-' || r == '_' })
}

// secretFlags are the secret flags the engines list: llama-server's
// (TestSecretFlagsCoverLlamaServer checks them against its captured
// --help), vLLM's and SGLang's --api-key, SGLang's --admin-api-key.
var secretFlags = []string{"API-KEY", "HF-TOKEN", "ADMIN-API-KEY"}

// nearSecretFlag reports whether a flag name (upper case, without dashes)
// is a typo of a secret flag: within 2 edits of one, a swap of two
// neighbours counting as one (--api-kye, --hf-tokne, --apikey). Its value
// is what the operator meant as a key, so it is masked as one; a name
// ending in FILE, PATH or DIR is a path, as for the exact names.
func nearSecretFlag(n string) bool {
	parts := flagParts(n)
	if len(parts) > 0 && slices.Contains(pathWords, parts[len(parts)-1]) {
		return false
	}
	for _, f := range secretFlags {
		if typo.Distance(n, f) <= 2 {
			return true
		}
	}
	return false
}

// JoinedFlag splits an argument that holds a secret flag and its value
// as one, whitespace between them ("--api-key K", "--api-key = K", a tab
// for the space): a TOML list's one item where two were meant. No engine
// reads it as the flag, so the key would be no key of the engine's and
// would show whole wherever the argument does. name is the flag, vals the
// words of its value (vLLM's --api-key K1 K2); ok is false for any other
// argument, the flag's own form "--api-key=K" included.
func JoinedFlag(a string) (name string, vals []string, ok bool) {
	a = strings.TrimLeftFunc(a, joinSep)
	i := strings.IndexFunc(a, joinSep)
	if i < 0 || strings.Contains(a[:i], "=") || !SecretFlag(a[:i]) {
		return "", nil, false
	}
	rest := strings.TrimPrefix(strings.TrimLeftFunc(a[i:], joinSep), "=")
	if vals = strings.FieldsFunc(rest, joinSep); len(vals) == 0 {
		// "--api-key " and its key in the next item: a flag as typed, its
		// value the argument after it, which SecretFlag masks.
		return "", nil, false
	}
	return a[:i], vals, true
}

// JoinedFix is the fix for flag name given joined to its value in one
// argument (JoinedFlag), in the one wording the command line and the
// engine arguments share.
func JoinedFix(name string) string {
	return "give the flag and its value as two arguments (" + name + " KEY; in a profile's engine.args, two list items: [" +
		strconv.Quote(name) + `, "KEY"]) or as ` + name + "=KEY"
}

// joinSep is what can stand between a joined flag and its value: white
// space, or an invisible format character (a zero-width space, U+FEFF,
// U+2060), which a paste from a web page carries and a terminal does not
// show. A key joined by either is joined all the same, so it is masked.
func joinSep(r rune) bool {
	return unicode.IsSpace(r) || unicode.Is(unicode.Cf, r)
}

// maskJoined is the argument JoinedFlag split into the flag name and the
// words vals of its value, each word masked.
func maskJoined(name string, vals []string) string {
	out := []string{name}
	for _, v := range vals {
		out = append(out, Mask(v))
	}
	return strings.Join(out, " ")
}

// ArgvValues are the secrets in argv (those MaskArgv masks): the values
// of the secret flags and the parts secret by shape, for a Redactor: a
// typo'd key flag still carries a key, which the engine may echo back in
// its refusal.
func ArgvValues(argv []string) []string {
	var out []string
	_, byFlag := maskArgv(argv)
	for i, v := range argv {
		if !byFlag[i] {
			out = append(out, ValueSecrets(v)...)
			continue
		}
		if _, vals, ok := JoinedFlag(v); ok {
			out = append(out, vals...)
			continue
		}
		if name, _, val, ok := flagValue(v); ok && SecretFlag(name) {
			v = val
		}
		if v != "" && !SecretFlag(v) { // "--api-key=--api-key": a flag, not a key
			out = append(out, v)
		}
	}
	return out
}

// MaskArgv returns argv with the value of every secret flag masked, in
// its forms: "--api-key K" and "--api-key=K", the further values of the
// first form up to the next argument that starts with "-" (vLLM's
// --api-key K1 K2), and the flag and its value in one argument
// ("--api-key K", JoinedFlag: each word of the value). A secret flag's
// value that looks like the next flag
// ("--hf-token --port 8080": vLLM's --hf-token takes an optional value) is
// left alone. Every other argument has its parts secret by shape masked
// (MaskValue: --header "Authorization: Bearer ****5555"). argv itself is
// not changed.
func MaskArgv(argv []string) []string {
	out, _ := maskArgv(argv)
	return out
}

// CredentialHeader reports whether argv[i] is an HTTP credential as curl
// takes one (a credential header, whole or its name with the value
// after it; -u user:password): no engine takes it on its command line,
// where the key would show to ps. HeaderFix says what to do instead.
func CredentialHeader(argv []string, i int) bool {
	a, next := argv[i], nextValue(argv, i)
	if _, _, ok := curlValue(a, next); ok {
		return true
	}
	var h string
	switch {
	case i > 0 && (argv[i-1] == "-H" || argv[i-1] == "--header"):
		h = a // the header itself is named in the refusal, not -H
	case a == "-H" || a == "--header":
		return false
	case strings.HasPrefix(a, "--header="):
		h = strings.TrimPrefix(a, "--header=")
	case strings.HasPrefix(a, "-H"):
		h = a[2:]
	default:
		return false
	}
	if l := authHeaderRE.FindStringIndex(h); l == nil || l[0] != 0 {
		return false
	}
	if headerEnd(h) {
		return next != ""
	}
	return MaskValue(h) != h // "Authorization: Bearer K", "Cookie: s=K"
}

// CurlCredentialFlag reports whether name is one of curl's options whose
// value is a credential whatever it holds (-u, --user, --cookie,
// --oauth2-bearer; curl's -b is llama-server's --batch-size too): typed
// where an engine flag goes, it is told what to do instead.
func CurlCredentialFlag(name string) bool {
	_, inNext, ok := curlValue(name, "u:p=v") // a value each of them takes
	return ok && inNext && name != "-b"
}

// curlUser is curl's -u user:password in its forms (-u U:P, --user U:P,
// -uU:P, --user=U:P): the value, whether it is the next argument's (next)
// rather than a's own, and whether a is one.
func curlUser(a, next string) (val string, inNext, ok bool) {
	switch {
	case a == "-u" || a == "--user":
		val, inNext = next, true
	case strings.HasPrefix(a, "--user="):
		val = strings.TrimPrefix(a, "--user=")
	case strings.HasPrefix(a, "-u") && !strings.HasPrefix(a, "--"):
		val = a[2:]
	}
	return val, inNext, strings.Contains(val, ":")
}

// curlCookie is curl's -b/--cookie and --oauth2-bearer in their forms: the
// value (a cookie string or a token), whether it is next's, and whether a
// is such a flag.
func curlCookie(a, next string) (val string, inNext, ok bool) {
	for _, f := range []string{"--cookie", "--oauth2-bearer"} {
		if a == f {
			return next, true, true
		}
		if v, found := strings.CutPrefix(a, f+"="); found {
			return v, false, true
		}
	}
	// -b is llama-server's --batch-size too: curl's only with a cookie's
	// name=value after it.
	if a == "-b" && strings.Contains(next, "=") {
		return next, true, true // not -bN=V glued: -b=2048 and -batch-size=N are llama-server's
	}
	return "", false, false
}

// curlValue is curl's credential of curlUser or curlCookie at a (its
// value, and whether it is next's), ok false for neither or an empty one.
func curlValue(a, next string) (val string, inNext, ok bool) {
	if val, inNext, ok = curlUser(a, next); ok {
		return val, inNext, true
	}
	val, inNext, ok = curlCookie(a, next)
	return val, inNext, ok && val != ""
}

// nextValue is the argument after argv[i] when it is not a flag.
func nextValue(argv []string, i int) string {
	if i+1 < len(argv) && !strings.HasPrefix(argv[i+1], "-") {
		return argv[i+1]
	}
	return ""
}

// HeaderFix is the fix of a CredentialHeader given to an engine.
const HeaderFix = "it is an HTTP client's credential (curl's -H or -u), not an engine flag: the engine refuses it, and the key would be on its command line for ps to show; give the engine its key with --api-key or --api-key-file (LLAMA_API_KEY) and send the header from the client"

// headerEnd reports whether argument a ends in a credential header's name
// and its colon ("-HAuthorization:", "X-Api-Key:"), or a scheme word after
// them ("Authorization: Bearer"), so that its value is the next argument,
// after a scheme word if there is one.
func headerEnd(a string) bool {
	hs := authHeaderRE.FindAllStringIndex(a, -1)
	if len(hs) == 0 {
		return false
	}
	rest := strings.TrimSpace(strings.Trim(a[hs[len(hs)-1][1]:], `"'`))
	if scheme, ok := strings.CutPrefix(rest, ":"); ok && strings.TrimSpace(scheme) != "" {
		rest = ":" // "Authorization: Bearer", the credential next
		if !schemeRE.MatchString(scheme) {
			return false
		}
	}
	return rest == ":"
}

// MaskArg is argument a masked as MaskArgv masks it alone: a secret
// flag's value joined to it or after "=", else its parts secret by shape.
func MaskArg(a string) string { return MaskArgv([]string{a})[0] }

// flagValue splits a flag's argument at "=", or at ":" where the part
// before it is a secret flag ("--hf-token:K", a typo the engine refuses
// with the key shown): name, separator, value, and whether it had one.
func flagValue(a string) (name, sep, val string, ok bool) {
	if name, val, ok = strings.Cut(a, "="); ok {
		return name, "=", val, true
	}
	if n, v, found := strings.Cut(a, ":"); found && v != "" && v[0] != ' ' && v[0] != '\t' && !strings.HasPrefix(n, "-H") && SecretFlag(n) {
		return n, ":", v, true // glued: "--hf-token: K" is prose or a header's
	}
	return a, "", "", false
}

// maskCurl masks out[i] and what follows it where they are curl's
// credential flags (curlUser, curlCookie): the password, the cookie or
// token whole. It returns the last index it read and whether it did.
func maskCurl(out []string, byFlag []bool, i int) (int, bool) {
	v, inNext, ok := curlValue(out[i], nextValue(out, i))
	switch {
	case !ok:
		return i, false
	case inNext:
		out[i+1], byFlag[i+1] = Mask(v), true // a user name may be the token too (-u TOKEN:x-oauth-basic)
		return i + 1, true
	}
	out[i], byFlag[i] = strings.TrimSuffix(out[i], v)+Mask(v), true
	return i, true
}

// maskArgv is MaskArgv, and which arguments it masked as a secret flag's.
func maskArgv(argv []string) (out []string, byFlag []bool) {
	out = make([]string, len(argv))
	copy(out, argv)
	byFlag = make([]bool, len(argv))
	mask := func(i int) {
		out[i], byFlag[i] = Mask(out[i]), true
	}
	for i := 0; i < len(out); i++ {
		if name, vals, ok := JoinedFlag(out[i]); ok {
			out[i], byFlag[i] = maskJoined(name, vals), true
			continue
		}
		if j, ok := maskCurl(out, byFlag, i); ok {
			i = j
			continue
		}
		if headerEnd(out[i]) { // "-HAuthorization:" "Bearer" "K": curl's header in parts
			if i+2 < len(out) && schemeRE.MatchString(out[i+1]) {
				i++ // the scheme stays
			}
			if i+1 < len(out) && !strings.HasPrefix(out[i+1], "-") {
				mask(i + 1)
				i++
			}
			continue
		}
		name, sep, val, inline := flagValue(out[i])
		if !SecretFlag(name) {
			continue
		}
		switch {
		case inline && SecretFlag(val):
			// "--api-key=--api-key K": the flag typed twice, the key next.
			out[i], byFlag[i] = name+sep+Mask(val), true
			if i+1 < len(out) && !strings.HasPrefix(out[i+1], "--") {
				mask(i + 1)
				i++
			}
		case inline:
			out[i], byFlag[i] = name+sep+Mask(val), true
		case i+1 < len(out) && !strings.HasPrefix(out[i+1], "--"):
			mask(i + 1)
			i++
		}
		// vLLM's --api-key K1 K2 (or =K1 K2): its further values.
		for i+1 < len(out) && !strings.HasPrefix(out[i+1], "-") {
			mask(i + 1)
			i++
		}
	}
	for i := range out {
		if !byFlag[i] {
			out[i] = MaskValue(out[i])
		}
	}
	return out, byFlag
}

// MaskEnv returns NAME=VALUE entries with the value of every secret-named
// variable masked, and in the others the parts secret by shape
// (MaskValue).
func MaskEnv(env []string) []string {
	out := make([]string, len(env))
	for i, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok {
			kv = k + "=" + maskEnvValue(k, v)
		}
		out[i] = kv
	}
	return out
}

// maskEnvValue masks variable k's value v: whole for a secret name, else
// by shape.
func maskEnvValue(k, v string) string {
	if SecretEnv(k) {
		return Mask(v)
	}
	if name, vals, ok := JoinedFlag(v); ok && ListedFlag(name) { // LLAMA_ARG_ALIAS="--api-key K"
		return maskJoined(name, vals)
	}
	return MaskValue(v)
}

// MaskEnvMap is MaskEnv for a name -> value map (a copy; nil stays nil).
func MaskEnvMap(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = maskEnvValue(k, v)
	}
	return out
}

// EnvValues are the values of the secret-named variables in env
// (NAME=VALUE entries) and the parts of the others secret by shape
// (ValueSecrets), sorted, for a Redactor.
func EnvValues(env []string) []string {
	var out []string
	for _, kv := range env {
		k, v, ok := strings.Cut(kv, "=")
		switch {
		case !ok || v == "":
		case SecretEnv(k):
			out = append(out, v)
		default:
			if name, vals, joined := JoinedFlag(v); joined && ListedFlag(name) {
				out = append(out, vals...) // not PYTEST_ADDOPTS="-k engine"
			}
			out = append(out, ValueSecrets(v)...)
		}
	}
	sort.Strings(out)
	return out
}
