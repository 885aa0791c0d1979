package modelhash

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/speclaunch/speclaunch/internal/safefile/safefiletest"
	"github.com/speclaunch/speclaunch/internal/testenv"
)

func shaHex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

func TestSum(t *testing.T) {
	dir := t.TempDir()
	small := filepath.Join(dir, "small.gguf")
	os.WriteFile(small, []byte("weights"), 0o644)
	got, err := Sum(small)
	if err != nil || got != shaHex("weights") { // a small file is hashed whole
		t.Errorf("small file: %s, %v", got, err)
	}

	// A large file is sampled: a change inside a sampled chunk changes the
	// hash, a change between samples does not (Method says so).
	big := filepath.Join(dir, "big.gguf")
	const size = 100 << 20
	f, _ := os.Create(big)
	f.Truncate(size)
	f.Close()
	h0, err := Sum(big)
	if err != nil {
		t.Fatal(err)
	}
	poke := func(off int64) string {
		t.Helper()
		f, _ := os.OpenFile(big, os.O_RDWR, 0)
		f.WriteAt([]byte{1}, off)
		f.Close()
		h, err := Sum(big)
		if err != nil {
			t.Fatal(err)
		}
		f, _ = os.OpenFile(big, os.O_RDWR, 0)
		f.WriteAt([]byte{0}, off)
		f.Close()
		return h
	}
	if poke(100) == h0 {
		t.Error("a change in the header did not change the hash")
	}
	if poke(3*size/17+10) == h0 {
		t.Error("a change in a sampled chunk did not change the hash")
	}
	if poke(size-5) == h0 {
		t.Error("a change in the last MiB did not change the hash")
	}
	if poke(4*size/17-(2<<20)) != h0 { // past the 16 MiB head, between the 3rd and 4th samples
		t.Error("a change between samples changed the hash: the method is not what Method states")
	}

	// a checkpoint directory hashes its files by relative path
	ck := filepath.Join(dir, "ck")
	os.Mkdir(ck, 0o755)
	os.WriteFile(filepath.Join(ck, "config.json"), []byte("{}"), 0o644)
	os.WriteFile(filepath.Join(ck, "model.safetensors"), []byte("w"), 0o644)
	d1, err := Sum(ck)
	if err != nil {
		t.Fatal(err)
	}
	os.Rename(filepath.Join(ck, "model.safetensors"), filepath.Join(ck, "model2.safetensors"))
	if d2, _ := Sum(ck); d2 == d1 {
		t.Error("renaming a file inside the checkpoint did not change its hash")
	}
	if _, err := Sum(filepath.Join(dir, "missing")); err == nil {
		t.Error("a missing model hashed")
	}
}

func TestSize(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "a"), []byte("12345"), 0o644)
	os.Mkdir(filepath.Join(dir, "sub"), 0o755)
	os.WriteFile(filepath.Join(dir, "sub", "b"), []byte("123"), 0o644)
	if got := Size(dir); got != 8 {
		t.Errorf("Size(dir) = %d, want 8", got)
	}
	if got := Size(filepath.Join(dir, "a")); got != 5 {
		t.Errorf("Size(file) = %d, want 5", got)
	}
	if got := Size(filepath.Join(dir, "missing")); got != 0 {
		t.Errorf("Size(missing) = %d, want 0", got)
	}
}

// fakeInfo is what a Stat said before the file was swapped.
type fakeInfo struct{ os.FileInfo }

func (fakeInfo) Size() int64       { return 1 << 30 }
func (fakeInfo) Mode() os.FileMode { return 0o644 }

// A model file over the whole-file cap is hashed by samples; a FIFO put
// in its place after the Stat is refused, not waited on for a writer (a
// serve --adapt hung there, SIGTERM unanswered).
func TestSampledHashRefusesAFIFO(t *testing.T) {
	fifo := safefiletest.Make(t, "m.gguf", 1)[safefiletest.FIFO]
	var err error
	testenv.Returns(t, "the sampled hash of a FIFO", func() { _, err = fileHash(fifo, fakeInfo{}) })
	if err == nil || !strings.Contains(err.Error(), "FIFO") {
		t.Errorf("err = %v, want the FIFO refused", err)
	}
}
