package secret

import (
	"regexp"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// A secret's name says nothing when the operator chose it (AUTH, DB_URL,
// FOO), so values are judged by their shape as well: an Authorization
// value, a token with a provider's prefix, a URL's password. MaskValue and
// ValueSecrets are that one rule; MaskEnv, MaskEnvMap, MaskArgv, EnvValues
// and ArgvValues apply it to whatever their names do not mask.

var (
	// A whole value "Bearer X", "Basic X" or "Token X": X is the secret
	// (after Basic or Token only when it looks generated: "Token budget"
	// and "Basic mode" are words, and a Redactor fed "budget" masked it in
	// every log line).
	authValueRE = regexp.MustCompile(`^\s*(?i:(bearer)|basic|token)\s+(\S+)\s*$`)
	// A scheme word alone, a credential's name and not the credential.
	schemeRE = regexp.MustCompile(`^\s*(?i:bearer|basic|token)\s*$`)
	// A header (or a JSON key) that carries a credential, its scheme
	// kept: "Authorization: Bearer X", `"X-Api-Key": "X"`.
	// curl's -H may be glued to the name ("-HAuthorization:", "-Hapi-key:"),
	// where no word boundary comes before it.
	// A cookie is a session's credential as much.
	authHeaderRE = regexp.MustCompile(`(?i)(?:\b|-H)(?:proxy-)?authorization|(?:\b|-H)(?:x[-_])?api[-_]?key|(?:\b|-H)(?:x-)?(?:auth|access|private)[-_]token|(?:\b|-H)subscription-key|(?:\b|-H)(?:set-)?cookie`)
	// The value starts and ends with no colon: "-HX-Api-Key:: neither" (a
	// flag named back in prose) holds no credential, and "K:" in "unknown
	// flag -HAuthorization: Bearer K: neither" ends at K.
	// A quote may open the value, and a comma or semicolon stand within it.
	authRestRE = regexp.MustCompile(`^"?\s*[:=]\s*"?(?:(?i:bearer|basic|token)\s+)?['"]?([^\s"',;:](?:[^\s"']*[^\s"',;:])?)`)
	// A cookie header's pairs after its first value: "; sid=K", a value
	// quoted or not (RFC 6265), so that every pair is masked.
	// An Authorization header's value in any scheme ("Bot K", "OAuth K",
	// "ApiKey K"): the token after the scheme word.
	authSchemeRE = regexp.MustCompile(`^"?\s*:\s*"?[A-Za-z][A-Za-z0-9._-]*\s+['"]?([^\s"',;:](?:[^\s"']*[^\s"',;:])?)`)
	// A cookie header whose value begins with its separator: ": ;sid=K".
	cookieLeadRE  = regexp.MustCompile(`^\s*:\s*;`)
	cookiePairsRE = regexp.MustCompile(`^(?:"[^"\s]*")?(?:\s*;\s*[^\s;=]+=(?:"[^"]*"|[^\s;"']*))*`)
	// A URL's password: scheme://user:PASS@host. The last "@" ends it (a
	// password may hold a raw "@"); a port (host:8080/) has none.
	urlPassRE = regexp.MustCompile(`[A-Za-z][A-Za-z0-9+.-]*://[^\s/?#@:]*:([^\s/?#]*)@`)
	// Tokens a provider marks with a prefix: OpenAI's and Stripe's sk-/sk_,
	// GitHub's, Hugging Face's, Slack's, GitLab's.
	prefixedRE = regexp.MustCompile(`(?:sk-|sk_|gh[pousr]_|github_pat_|hf_|xox[abposr]-|glpat-)([A-Za-z0-9_-]{8,})`)
	// An AWS access key id, a Google API key, a JWT (three base64url
	// segments, the first a JSON object: "eyJ").
	awsRE    = regexp.MustCompile(`(?:AKIA|ASIA)[0-9A-Z]{16}`)
	googleRE = regexp.MustCompile(`AIza[0-9A-Za-z_-]{30,}`)
	jwtRE    = regexp.MustCompile(`eyJ[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*`)
)

func isAlnum(b byte) bool {
	return b >= '0' && b <= '9' || b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z'
}

// wordAt reports whether v[s:e] stands alone: no letter or digit just
// before or after it (desk-…, task-… are words, not sk- tokens).
func wordAt(v string, s, e int) bool {
	return (s == 0 || !isAlnum(v[s-1])) && (e == len(v) || !isAlnum(v[e]))
}

// inPath reports whether v[s:e] is a file or directory name in a path
// (/models/hf_Llama3-8B-Instruct/model.gguf, /loras/sk-Fantasy2024.gguf):
// a name, not a credential, which masked would hide the model from the log.
func inPath(v string, s, e int) bool {
	return s > 0 && v[s-1] == '/' || e < len(v) && (v[e] == '/' || v[e] == '.')
}

// randomish reports whether a token's body has a digit or a capital, as a
// generated one does: hf_transfer, hf_models and sk-learn are words.
func randomish(body string) bool {
	return strings.ContainsFunc(body, func(r rune) bool { return r >= '0' && r <= '9' || r >= 'A' && r <= 'Z' })
}

// headerValue reports whether the match m of authRestRE after the header
// name v[h[0]:h[1]] is a credential rather than prose. A value after
// Bearer, Basic or Token is a credential whatever its length. Otherwise it
// is prose after a flag's name (proseFlag: --api-key, -api-key,
// --API-KEY, --Admin-Api-Key) followed by a colon ("Spell it --api-key: as
// given", "unknown flag --API-KEY: neither…": a flag takes its value after
// "=" or a space, so "--api-key:" starts a sentence, not a header), or a
// short word ("api-key: as": letters only and shorter than MinRedact,
// which the Redactor leaves alone too).
func headerValue(v string, h, m []int) bool {
	rest := v[h[1]:]
	s := h[0]
	for s > 0 {
		if isAlnum(v[s-1]) || v[s-1] == '-' || v[s-1] == '_' {
			s--
			continue
		}
		r, n := utf8.DecodeLastRuneInString(v[:s])
		if !otherDash(r) { // "-—api-key: neither": autocorrect's dash is a flag's too
			break
		}
		s -= n
	}
	if strings.TrimSpace(strings.Trim(strings.TrimSpace(rest[:m[2]]), `":=`)) != "" {
		return true // schemed
	}
	if proseFlag(v[s:h[1]]) && proseColon(rest[:m[2]]) {
		return false
	}
	val := rest[m[2]:m[3]]
	if schemeRE.MatchString(val) {
		return false // a scheme word alone ("Authorization: Bearer", its credential in the next argument, or quoted in a message) is none
	}
	return len(val) >= MinRedact || strings.ContainsFunc(val, func(r rune) bool { return !unicode.IsLetter(r) })
}

// proseColon reports whether the text between a flag's name and the value
// after it is a colon and white space, as prose writes one ("--API-KEY:
// neither"); a value glued to the colon ("--API-KEY:K") is the flag's.
func proseColon(sep string) bool {
	i := strings.Index(sep, ":")
	return i >= 0 && i+1 < len(sep) && strings.TrimSpace(sep[i+1:]) == "" && sep[i+1:] != ""
}

// proseFlag reports whether name, before a colon, is a flag's as prose
// names it: dashes, then letters of any case and dashes (--api-key,
// -api-key, --API-KEY, --Api-Key; llama-server's flags are
// case-sensitive, so an operator's --API-KEY is named back as typed). Not
// curl's glued header, one dash and H before the header's name
// ("-HX-Api-Key: K", "-Hapi-key: K"): a header, its value a credential.
func proseFlag(name string) bool {
	if plain, _, ok := PlainDashes(name); ok {
		name = plain // "-—api-key: neither"
	}
	bare := strings.TrimLeft(name, "-")
	if bare == "" || bare == name || strings.TrimFunc(bare, func(r rune) bool { return r == '-' || r == '_' || r < utf8.RuneSelf && unicode.IsLetter(r) }) != "" {
		return false
	}
	return len(name)-len(bare) > 1 || bare[0] != 'H'
}

// cookieEnd is where a cookie header's value that reaches from before e
// ends: past every further pair (cookiePairsRE), so that all of
// "Cookie: a=1; sid=K" is masked, not the first pair alone, and no more
// of a message than the pairs.
func cookieEnd(v string, e int) int {
	return e + len(cookiePairsRE.FindString(v[e:]))
}

// valueSpans are the byte ranges of v that are secret by shape, sorted
// and merged where they overlap.
func valueSpans(v string) [][2]int {
	var sp [][2]int
	add := func(s, e int) {
		if s < e {
			sp = append(sp, [2]int{s, e})
		}
	}
	if m := authValueRE.FindStringSubmatchIndex(v); m != nil && (m[2] >= 0 || randomish(v[m[4]:m[5]])) {
		add(m[4], m[5])
	}
	for _, h := range authHeaderRE.FindAllStringIndex(v, -1) {
		if c := cookieLeadRE.FindStringIndex(v[h[1]:]); c != nil && strings.HasSuffix(strings.ToLower(v[h[0]:h[1]]), "cookie") {
			add(h[1]+c[1]-1, cookieEnd(v, h[1]+c[1]-1)) // "Cookie: ;sid=K": no first value
			continue
		}
		if strings.HasSuffix(strings.ToLower(v[h[0]:h[1]]), "authorization") {
			if m := authSchemeRE.FindStringSubmatchIndex(v[h[1]:]); m != nil && !schemeRE.MatchString(v[h[1]+m[2]:h[1]+m[3]]) {
				add(h[1]+m[2], h[1]+m[3]) // "Authorization: Bot K"
				continue
			}
		}
		if m := authRestRE.FindStringSubmatchIndex(v[h[1]:]); m != nil && headerValue(v, h, m) {
			e := h[1] + m[3]
			if strings.HasSuffix(strings.ToLower(v[h[0]:h[1]]), "cookie") {
				e = cookieEnd(v, e) // every pair: "a=1; sid=K"
			}
			add(h[1]+m[2], e)
		}
	}
	for _, m := range urlPassRE.FindAllStringSubmatchIndex(v, -1) {
		add(m[2], m[3])
	}
	for _, m := range prefixedRE.FindAllStringSubmatchIndex(v, -1) {
		if wordAt(v, m[0], m[1]) && !inPath(v, m[0], m[1]) && randomish(v[m[2]:m[3]]) {
			add(m[0], m[1])
		}
	}
	for _, re := range []*regexp.Regexp{awsRE, googleRE, jwtRE} {
		for _, m := range re.FindAllStringIndex(v, -1) {
			if wordAt(v, m[0], m[1]) {
				add(m[0], m[1])
			}
		}
	}
	slices.SortFunc(sp, func(a, b [2]int) int { return a[0] - b[0] })
	var out [][2]int
	for _, s := range sp {
		if n := len(out); n > 0 && s[0] < out[n-1][1] {
			out[n-1][1] = max(out[n-1][1], s[1])
			continue
		}
		out = append(out, s)
	}
	return out
}

// MaskValue returns v with each part that is secret by its shape masked
// (Mask), the rest as it is: "Bearer ****5555",
// "postgres://u:****T-77@h/db", "****7777" for sk-SECRET7777. Ordinary
// values (paths, numbers, hosts, URLs without a password) are left whole.
func MaskValue(v string) string {
	sp := valueSpans(v)
	if len(sp) == 0 {
		return v
	}
	var b strings.Builder
	at := 0
	for _, s := range sp {
		b.WriteString(v[at:s[0]])
		b.WriteString(Mask(v[s[0]:s[1]]))
		at = s[1]
	}
	b.WriteString(v[at:])
	return b.String()
}

// ValueSecrets are the parts of v that MaskValue masks, for a Redactor.
func ValueSecrets(v string) []string {
	var out []string
	for _, s := range valueSpans(v) {
		out = append(out, v[s[0]:s[1]])
	}
	return out
}
