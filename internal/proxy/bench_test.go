package proxy

import (
	"bufio"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/speclaunch/speclaunch/internal/fakellama"
)

// stream sends one streamed /completion and returns the time to the first
// token and the tokens per second between the first and the last token.
func stream(b *testing.B, c *http.Client, url string, n int) (ttft time.Duration, tps float64, tokens int) {
	t0 := time.Now()
	resp, err := c.Post(url+"/completion", "application/json", strings.NewReader(`{"prompt":"def fib(n):","n_predict":`+strconv.Itoa(n)+`,"stream":true}`))
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	var first, last time.Time
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "data: ") && strings.Contains(sc.Text(), `"content"`) {
			last = time.Now()
			if first.IsZero() {
				first = last
			}
			tokens++
		}
	}
	if tokens < 2 {
		b.Fatalf("%d tokens", tokens)
	}
	return first.Sub(t0), float64(tokens-1) / last.Sub(first).Seconds(), tokens
}

func cpu() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkProxyCost streams from the fake llama-server at 2,000 tokens/s,
// directly and through the proxy, in alternating order, and reports the
// proxy's throughput over direct (target >= 0.99), its added median time to
// first token (target < 0.5 ms) and the CPU it adds per streamed token.
//
//	go test -bench ProxyCost -benchtime 20x ./proxy
func BenchmarkProxyCost(b *testing.B) {
	addr, stop, err := fakellama.Start([]string{"-m", "t.gguf", "--host", "127.0.0.1", "--port", "0"}, []string{"FAKELLAMA_TOKENS_PER_S=2000"}, io.Discard)
	if err != nil {
		b.Fatal(err)
	}
	defer stop()
	direct := "http://" + addr
	be, _ := NewBackend(direct, "fake")
	p := New(Options{})
	p.Route(be)
	front := httptest.NewServer(p)
	defer front.Close()
	c := &http.Client{}
	const n = 400
	stream(b, c, direct, 8) // warm both paths' connections
	stream(b, c, front.URL, 8)
	var dT, pT, dTP, pTP []float64
	var dCPU, pCPU time.Duration
	var dTok, pTok int
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		c0 := cpu()
		t, tps, k := stream(b, c, direct, n)
		dCPU += cpu() - c0
		dT, dTP, dTok = append(dT, float64(t.Microseconds())), append(dTP, tps), dTok+k
		c0 = cpu()
		t, tps, k = stream(b, c, front.URL, n)
		pCPU += cpu() - c0
		pT, pTP, pTok = append(pT, float64(t.Microseconds())), append(pTP, tps), pTok+k
	}
	b.StopTimer()
	med := func(v []float64) float64 { s := slices.Clone(v); slices.Sort(s); return s[len(s)/2] }
	b.ReportMetric(med(pTP)/med(dTP), "proxy/direct_tok/s")
	b.ReportMetric(med(dTP), "direct_tok/s")
	b.ReportMetric((med(pT)-med(dT))/1000, "added_ttft_ms")
	b.ReportMetric(float64((pCPU-dCPU).Microseconds())/float64(pTok), "proxy_cpu_us/token")
}
