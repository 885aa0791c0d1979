package secret

import (
	"crypto/subtle"
	"io"
	"net/http"
	"strings"
)

// Bearer wraps base (nil = http.DefaultTransport) so that every request
// carries "Authorization: Bearer KEY", KEY being key() at the time of the
// request ("" = none added). A request that already has an Authorization
// header keeps it.
func Bearer(base http.RoundTripper, key func() string) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return &bearer{base: base, key: key}
}

type bearer struct {
	base http.RoundTripper
	key  func() string
}

func (b *bearer) RoundTrip(req *http.Request) (*http.Response, error) {
	k := ""
	if b.key != nil {
		k = b.key()
	}
	if k == "" || req.Header.Get("Authorization") != "" {
		return b.base.RoundTrip(req)
	}
	r2 := req.Clone(req.Context()) // a RoundTripper must not change the request
	r2.Header.Set("Authorization", "Bearer "+k)
	return b.base.RoundTrip(r2)
}

// Client returns a copy of c whose requests carry the key (see Bearer); c
// nil is a zero http.Client.
func Client(c *http.Client, key func() string) *http.Client {
	var out http.Client
	if c != nil {
		out = *c
	}
	out.Transport = Bearer(out.Transport, key)
	return &out
}

// Static is a key function for one fixed key.
func Static(key string) func() string { return func() string { return key } }

// First is the key speclaunch sends of an engine's keys: the first; "" for
// none.
func First(keys []string) string {
	if len(keys) == 0 {
		return ""
	}
	return keys[0]
}

// Authorized reports whether r presents one of keys as llama-server checks
// it (tools/server/server-http.cpp): the Authorization header, else
// X-Api-Key, with an optional "Bearer " prefix, compared exactly. No keys
// means open.
func Authorized(r *http.Request, keys []string) bool {
	if len(keys) == 0 {
		return true
	}
	got := r.Header.Get("Authorization")
	if got == "" {
		got = r.Header.Get("X-Api-Key")
	}
	got = strings.TrimPrefix(got, "Bearer ")
	ok := false
	for _, k := range keys {
		if subtle.ConstantTimeCompare([]byte(got), []byte(k)) == 1 {
			ok = true
		}
	}
	return ok
}

// UnauthorizedBody is llama-server's 401 body, byte for byte.
const UnauthorizedBody = `{"error":{"message":"Invalid API Key","type":"authentication_error","code":401}}`

// publicPaths need no key (d32676d's get_public_endpoints).
var publicPaths = map[string]bool{"/health": true, "/v1/health": true, "/models": true, "/v1/models": true}

// Refused is llama-server's key check as an engine applies it
// (middleware_validate_api_key): with keys, a request to any path but the
// public ones that is not Authorized is refused (401 with
// UnauthorizedBody). No keys: none is.
func Refused(r *http.Request, keys []string) bool {
	return len(keys) > 0 && !publicPaths[r.URL.Path] && !Authorized(r, keys)
}

// Require answers the requests Refused refuses with Unauthorized, and
// passes the others to next. No keys: next as it is.
func Require(keys []string, next http.Handler) http.Handler {
	if len(keys) == 0 {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if Refused(r, keys) {
			Unauthorized(w)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// Unauthorized answers as llama-server does a request without a valid key:
// 401 and UnauthorizedBody.
func Unauthorized(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(http.StatusUnauthorized)
	io.WriteString(w, UnauthorizedBody)
}
