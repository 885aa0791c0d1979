package secret

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/speclaunch/speclaunch/internal/typo"
)

// Spec names where an engine reads its API keys.
type Spec struct {
	Flags     []string // flags whose value is a key: --api-key
	FileFlags []string // flags whose value is a key file: --api-key-file
	Env       []string // variables whose value is a key: LLAMA_API_KEY
	FileEnv   []string // variables whose value is a key file: LLAMA_ARG_API_KEY_FILE
	// Split: a key value is a comma-separated list of keys (llama-server's
	// --api-key and LLAMA_API_KEY); empty items are skipped.
	Split bool
	// Multi: a key flag takes one or more values, up to the next argument
	// that starts with "-" (vLLM's --api-key K1 K2).
	Multi bool
}

// Keys returns the API keys an engine started with argv and env (the
// child's full NAME=VALUE environment) accepts: flags first, then key files
// named by flags, then variables, then key files named by variables, each
// in order. A key file holds one key per line, as llama-server reads it:
// lines empty or starting with "#" are skipped, nothing is trimmed (a key
// with space at either end is refused: sendable). read reads a key file
// (bounded, and its errors naming the file: the caller's); its error is
// returned after the flag or variable that named the file. A file named
// more than once is read once. No key means the engine is open.
func Keys(sp Spec, argv, env []string, read func(path string) ([]byte, error)) ([]string, error) {
	ks := keyList{sp: sp}
	files, fileFrom, err := ks.flags(argv)
	if err != nil {
		return nil, err
	}
	vars := map[string]string{}
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok {
			vars[k] = v
		}
	}
	readDone := map[string]bool{}
	read1 := func(path, from string) error {
		if readDone[path] { // a file named twice is read once
			return nil
		}
		readDone[path] = true
		fk, err := fileKeys(read, path, from, sp)
		ks.keys = append(ks.keys, fk...)
		return err
	}
	for i, f := range files {
		if err := read1(f, fileFrom[i]); err != nil {
			return nil, err
		}
	}
	for _, n := range sp.Env {
		if v := vars[n]; v != "" {
			if sp.Split && strings.Trim(v, ",") == "" {
				return nil, fmt.Errorf("%s=%q holds no key: set it to the key (a comma-separated list), or unset it; without a key the engine would serve with no API key", n, v)
			}
			if err := ks.add(v, UnsendableError{From: "env " + n, Env: n}); err != nil {
				return nil, err
			}
		}
	}
	for _, n := range sp.FileEnv {
		if v := vars[n]; v != "" {
			if err := read1(v, n); err != nil {
				return nil, err
			}
		}
	}
	return ks.keys, nil
}

// keyList gathers the keys Keys finds.
type keyList struct {
	sp   Spec
	keys []string
}

// add adds the keys of one value (a comma-separated list where the spec
// splits), refusing one no client can send, named by src.
func (ks *keyList) add(v string, src UnsendableError) error {
	if !ks.sp.Split {
		if v != "" {
			ks.keys = append(ks.keys, v)
		}
		return sendable(v, src)
	}
	for _, k := range strings.Split(v, ",") {
		if k != "" {
			ks.keys = append(ks.keys, k)
		}
		if err := sendable(k, src); err != nil {
			return err
		}
	}
	return nil
}

// flags adds the keys of argv's key flags and returns the key files its
// file flags name, with the flag that named each.
func (ks *keyList) flags(argv []string) (files, fileFrom []string, err error) {
	sp := ks.sp
	for i := 0; i < len(argv); i++ {
		name, _, _ := strings.Cut(argv[i], "=")
		isKey := slices.Contains(sp.Flags, name)
		if !isKey && !slices.Contains(sp.FileFlags, name) {
			continue
		}
		vals, last, nerr := sp.valueAt(argv, i)
		if nerr != nil {
			return nil, nil, nerr
		}
		i = last
		if !isKey {
			files, fileFrom = append(files, vals[0]), append(fileFrom, name)
			continue
		}
		src := UnsendableError{From: "engine flag " + name, Flag: name}
		for _, v := range vals {
			if err := ks.add(v, src); err != nil {
				return nil, nil, err
			}
		}
	}
	return files, fileFrom, nil
}

// valueAt reads the key or key-file flag at argv[i] as the engine does:
// its values (several for a Multi key flag given apart, vLLM's --api-key
// K1 K2) and the index of the last argument it took; a *NoValueError
// where it has no usable value: none, empty, or another key flag where
// its value goes. The one reading Keys and TakeKeyFlags share.
func (sp Spec) valueAt(argv []string, i int) (vals []string, last int, nerr *NoValueError) {
	name, val, inline := strings.Cut(argv[i], "=")
	fail := func(next, stray string) ([]string, int, *NoValueError) {
		e := sp.NoValue(name)
		e.Next, e.Stray = next, stray
		return nil, i, e
	}
	last = i
	switch {
	case !inline && i+1 >= len(argv):
		return fail("", "")
	case !inline && (sp.keyFlag(argv[i+1]) || argv[i+1] == "--"):
		return fail(argv[i+1], "")
	case !inline:
		last = i + 1
		val = argv[last]
	case sp.keyFlag(val): // "--api-key=--api-key K"
		return fail(val, "")
	}
	isKey := slices.Contains(sp.Flags, name)
	if !sp.Multi && isKey && last+1 < len(argv) && !strings.HasPrefix(argv[last+1], "-") {
		// "--api-key=K1 K2": an engine of one key value (llama-server,
		// the sim) takes K1 alone, and K2 would sit on its command line
		// as a plain argument, which it refuses at start.
		return fail("", argv[last+1])
	}
	if sp.EmptyKey(name, val) {
		return fail("", "")
	}
	vals = []string{val}
	for sp.Multi && !inline && isKey && last+1 < len(argv) && !strings.HasPrefix(argv[last+1], "-") {
		last++
		vals = append(vals, argv[last])
	}
	return vals, last, nil
}

// UnsendableError is a key no HTTP client can send: HTTP drops a header
// value's surrounding space, and refuses one with a control character in
// it (Go's client: "invalid header field value for \"Authorization\""), so
// every request would get 401. It names where the key came from and what
// is wrong with it, never the key.
type UnsendableError struct {
	// From names the source: "engine flag --api-key", "env
	// LLAMA_API_KEY", "--api-key-file: key file keys.txt:2".
	From string
	Flag string // the key flag that gave the key, if one did
	Env  string // the variable that gave the key, if one did
	// Why says what is wrong (unsendable): "ends with a newline", "holds a
	// control character (a newline) at byte 13".
	Why string
}

func (e *UnsendableError) Error() string {
	why := e.Why
	if why == "" { // a caller's own UnsendableError
		why = "begins or ends with white space"
	}
	if e.Flag == "" && e.Env == "" && strings.Contains(why, "ends with a carriage return") { // a key file's line
		why += " (a key file saved with CRLF line ends?)"
	}
	why += ", which no HTTP client can send: every request would get 401; remove it"
	if e.Flag != "" {
		// Not "--api-key: …": masking by shape reads that as a header's key.
		return e.From + " gives an API key that " + why
	}
	return e.From + ": an API key " + why
}

// sendable refuses a key no HTTP client can send, naming src.
func sendable(k string, src UnsendableError) error {
	if why := unsendable(k); why != "" {
		src.Why = why
		return &src
	}
	return nil
}

// unsendable says what makes a key one no HTTP client can send, "" when
// nothing does: white space at either end (a key file's line saved with
// CRLF, a pasted space, a variable set from a file with its newline), or
// a byte a header value cannot carry within it: a control character
// other than a tab, or DEL (a newline pasted into the key). It names the
// characters, never the key.
func unsendable(k string) string {
	if k != strings.TrimSpace(k) {
		var at []string
		if r, _ := utf8.DecodeRuneInString(k); unicode.IsSpace(r) {
			at = append(at, "begins with "+charName(r))
		}
		if r, _ := utf8.DecodeLastRuneInString(k); unicode.IsSpace(r) {
			at = append(at, "ends with "+charName(r))
		}
		return strings.Join(at, " and ")
	}
	for i := 0; i < len(k); i++ {
		if b := k[i]; b < ' ' && b != '\t' || b == 0x7f {
			return fmt.Sprintf("holds a control character (%s) at byte %d", charName(rune(b)), i+1)
		}
	}
	return ""
}

// charNames are the characters unsendable names in words.
var charNames = map[rune]string{' ': "a space", '\t': "a tab", '\r': "a carriage return", '\n': "a newline",
	0: "a NUL", 0x1b: "an escape", 0x7f: "a DEL"}

// charName names a character of a key: in words where it has a common
// name, else by its code point (U+00A0).
func charName(r rune) string {
	if n, ok := charNames[r]; ok {
		return n
	}
	return fmt.Sprintf("U+%04X", r)
}

// UnreadKeyVar is the first variable of env (NAME=VALUE, set) whose name
// says it holds an engine's API key while the engine reads none from it:
// LLAMA_ARG_API_KEY (llama-server reads LLAMA_API_KEY), MLXCEL_API_KEY, a
// typo such as LLAMA_API_KYE. With no key from elsewhere the engine serves
// open while the operator believes a key is set. "" when there is none.
// Names of a download token (HF) are not API keys.
func UnreadKeyVar(sp Spec, env []string) string {
	for _, kv := range env {
		n, v, _ := strings.Cut(kv, "=")
		u := strings.ToUpper(n)
		if v == "" || slices.Contains(sp.Env, n) || slices.Contains(sp.FileEnv, n) || strings.Contains(u, "HF") {
			continue
		}
		engineVar := false
		for _, pre := range []string{"LLAMA_", "MLXCEL_", "VLLM_", "SGLANG_"} {
			engineVar = engineVar || strings.HasPrefix(u, pre)
		}
		if engineVar && (SecretEnv(n) || keyFileTypo(u) || otherCase(sp, n)) {
			return n
		}
	}
	return ""
}

// otherCase reports whether n is a variable the engine reads a key or a
// key file from in another case (llama_arg_api_key_file): variables'
// names are case-sensitive, so the engine reads nothing from it.
func otherCase(sp Spec, n string) bool {
	for _, v := range slices.Concat(sp.Env, sp.FileEnv) {
		if v != n && strings.EqualFold(v, n) {
			return true
		}
	}
	return false
}

// LlamaKeyFileEnv is the variable llama-server (and the engines that take
// its flags) reads a key file's path from; engine.APIKeySpec names it.
const LlamaKeyFileEnv = "LLAMA_ARG_API_KEY_FILE"

// keyFileEnvs are the variables an engine reads a key file's path from.
var keyFileEnvs = []string{LlamaKeyFileEnv}

// keyFileTypo reports whether a variable's name (upper case) is a typo of
// one an engine reads a key file's path from: the same but for its
// underscores or one more edit (LLAMA_ARG_APIKEYFILE, LLAMA_ARG_API_KEYFILE),
// or its path named PATH or FILENAME (LLAMA_ARG_API_KEY_PATH). SecretEnv
// takes a name ending in FILE or PATH for a path, so these went unwarned.
func keyFileTypo(u string) bool {
	n := strings.ReplaceAll(u, "_", "")
	for _, suf := range []string{"FILENAME", "PATH"} {
		if stem, ok := strings.CutSuffix(n, suf); ok {
			n = stem + "FILE"
		}
	}
	for _, f := range keyFileEnvs {
		if f != u && typo.Distance(n, strings.ReplaceAll(f, "_", "")) <= 1 {
			return true
		}
	}
	return false
}

// KeyFix says where sp's engine reads its API key.
func KeyFix(sp Spec) string {
	from := append(slices.Clone(sp.Flags), sp.FileFlags...)
	from = append(from, sp.Env...)
	from = append(from, sp.FileEnv...)
	return "give the key with " + strings.Join(from, ", ")
}

// ClearlyPath reports whether v, the value of a key-file flag or variable
// that cannot be read, is clearly a path, and so may be shown in the error:
// it exists (a directory, a file this user cannot read), or it has a
// directory part, other than the root alone, that is an existing directory
// (/etc/speclaunch/key.txt where /etc/speclaunch exists; ./keys.txt, whose
// "./" names the current directory). Any other value may be a key given
// where its file belongs, and is never shown (KeyNotFileError): "/" is in
// half the keys `openssl rand -base64 32` prints (q1w2/U7i8+Q=, /Q1w2=), a
// password may end in a dot-extension (hunter2.pass), and a bare name
// (keys.txt) says nothing either way. "~" is not expanded: speclaunch and
// the engine open the path as given (a shell expands it before).
func ClearlyPath(v string) bool {
	if _, err := os.Lstat(v); err == nil {
		return true
	}
	dir, _ := filepath.Split(v)
	if dir == "" || filepath.Clean(dir) == filepath.VolumeName(dir)+string(filepath.Separator) {
		return false
	}
	fi, err := os.Stat(dir)
	return err == nil && fi.IsDir()
}

// KeyNotFileError is a key-file flag or variable whose value cannot be read
// and is not clearly a path (ClearlyPath): it may be a key given where its
// file belongs. The message never shows the value.
type KeyNotFileError struct {
	From  string // the flag or variable: --api-key-file, LLAMA_ARG_API_KEY_FILE
	Value string // the value given, never printed: for a Redactor
	Fix   string // where a key and a key file go (Spec.keyOrFile)
}

func (e *KeyNotFileError) Error() string {
	return e.From + ": no such file (the value is not shown, since it may be a key: " + e.Fix + ")"
}

// keyOrFile says where sp's engine takes a key and a key file: "give a key
// with --api-key or LLAMA_API_KEY, a file's path with --api-key-file or
// LLAMA_ARG_API_KEY_FILE".
func (sp Spec) keyOrFile() string {
	keys := append(slices.Clone(sp.Flags), sp.Env...)
	files := append(slices.Clone(sp.FileFlags), sp.FileEnv...)
	var say []string
	if len(keys) > 0 {
		say = append(say, "give a key with "+strings.Join(keys, " or "))
	}
	if len(files) > 0 {
		say = append(say, "a file's path with "+strings.Join(files, " or "))
	}
	if len(say) == 0 {
		return "give the path of an existing key file"
	}
	return strings.Join(say, ", ")
}

// fileKeys reads a key file as llama-server does: one key a line, lines
// empty or starting with "#" skipped, nothing trimmed. A file with no key
// is refused: the engine would serve open while the operator believes a
// key is set. from names the flag or variable that named the file.
func fileKeys(read func(path string) ([]byte, error), path, from string, sp Spec) ([]string, error) {
	b, err := read(path)
	if err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) && !ClearlyPath(path) {
		// The read's error would name the value.
		return nil, &KeyNotFileError{From: from, Value: path, Fix: sp.keyOrFile()}
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", from, err)
	}
	var keys []string
	for n, line := range strings.Split(string(b), "\n") {
		if line != "" && line[0] != '#' {
			keys = append(keys, line)
			if why := unsendable(line); why != "" { // the line's source is formatted only then: a file may hold 100,000 keys
				return nil, &UnsendableError{From: fmt.Sprintf("%s: key file %s:%d", from, path, n+1), Why: why}
			}
		}
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("%s: key file %s holds no key (one a line; empty lines and lines starting with # are skipped): put the key in it, or drop %s; without a key the engine would serve with no API key", from, path, from)
	}
	return keys, nil
}

// NoValueError is the error for a key flag given no key: the sim and some
// engines would start open, and the operator believes a key is set. It
// names no source: its caller knows where the flag was given.
type NoValueError struct {
	Flag string
	Alt  []string // the variables that can give the key instead
	// Next is the key flag that followed Flag where its value goes
	// ("--api-key --api-key K", a flag given twice; or "--"): read as the
	// key, it would leave K a plain argument on the engine's command line.
	Next string
	// Stray is a plain argument after Flag=KEY ("--api-key=K1 K2"): a
	// second key the engine would not read, on its command line.
	Stray string
}

func (e *NoValueError) Error() string {
	if e.Stray != "" {
		return fmt.Sprintf("engine flag %s and its key are followed by a plain argument (%s), which the engine would not read as a key and which would sit on its command line: give several keys as one comma-separated value (%s K1,K2)", e.Flag, Mask(e.Stray), e.Flag)
	}
	if e.Next == "--" {
		return fmt.Sprintf("engine flag %s has no value (the argument after it is --, the end of flags): %s", e.Flag, e.Fix())
	}
	if e.Next != "" {
		return fmt.Sprintf("engine flag %s has no value (the argument after it, %s, is a key flag: one of the two is extra): %s", e.Flag, MaskArg(e.Next), e.Fix())
	}
	return fmt.Sprintf("engine flag %s has no value: %s", e.Flag, e.Fix())
}

// Fix says how to give the key.
func (e *NoValueError) Fix() string {
	hint := ""
	if len(e.Alt) > 0 {
		hint = ", or set " + strings.Join(e.Alt, " or ")
	}
	return fmt.Sprintf("give it after the flag (%s VALUE)%s; without it the engine would serve with no API key", e.Flag, hint)
}

// keyFlag reports whether argument a is one of sp's key or key-file
// flags, alone or with "=value".
func (sp Spec) keyFlag(a string) bool {
	name, _, _ := strings.Cut(a, "=")
	return slices.Contains(sp.Flags, name) || slices.Contains(sp.FileFlags, name)
}

// NoValue is the error for a key flag of sp given no key.
func (sp Spec) NoValue(flag string) *NoValueError {
	return &NoValueError{Flag: flag, Alt: append(slices.Clone(sp.Env), sp.FileEnv...)}
}

// EmptyKey reports whether val, the value of key flag flag, gives no key:
// empty, or (a comma list) only commas.
func (sp Spec) EmptyKey(flag, val string) bool {
	return val == "" || slices.Contains(sp.Flags, flag) && sp.Split && strings.Trim(val, ",") == ""
}

// TakeKeyFlags takes sp's key flags and their values out of argv, read as
// Keys reads them: rest is argv without them and values the flags' values
// in order (a comma list stays one value). ok is false, and argv is left
// whole, when a key flag has no usable value: Keys then names it.
func TakeKeyFlags(sp Spec, argv []string) (rest, values []string, ok bool) {
	for i := 0; i < len(argv); i++ {
		name, _, _ := strings.Cut(argv[i], "=")
		if !slices.Contains(sp.Flags, name) {
			rest = append(rest, argv[i])
			continue
		}
		vals, last, nerr := sp.valueAt(argv, i)
		if nerr != nil {
			return argv, nil, false
		}
		values, i = append(values, vals...), last
	}
	return rest, values, true
}
