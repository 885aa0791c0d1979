// Package modelhash names a model by its content: a hash of a weights file
// or checkpoint directory, fast enough for multi-GB files. Records, the
// adaptive state and tuned policy entries key a model pair by it.
package modelhash

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"github.com/speclaunch/speclaunch/internal/safefile"
)

// A model pair is its exact weights: the same recipe trained twice gave
// best widths 7 and 4 on one H200. Records therefore name the target and
// the drafter by a hash of their content, fast enough for multi-GB files.
const (
	// hashWhole: files up to this size are hashed whole.
	hashWhole = 64 << 20
	// hashHead covers a GGUF's header, metadata and tensor table (and a
	// safetensors header) with room to spare.
	hashHead    = 16 << 20
	hashChunk   = 1 << 20
	hashSamples = 16
	// maxHashFiles bounds a checkpoint directory.
	maxHashFiles = 4096
)

// Method states exactly what Sum hashes.
const Method = "sha256 of the file whole when it is at most 64 MiB; above that, sha256 over the file size " +
	"(8 bytes, little-endian), its first 16 MiB, 16 chunks of 1 MiB at offsets (i+1)*size/17 (i = 0..15), and its last 1 MiB " +
	"(\"sampled\": trained weights differ in every tensor, so two trainings never share the samples). " +
	"A directory: sha256 over each regular file's relative path, a NUL, and its own hex hash and a newline, in path order"

// Sum hashes a model file or checkpoint directory by Method.
func Sum(path string) (string, error) {
	info, err := os.Stat(path)
	if err != nil {
		return "", err
	}
	if !info.IsDir() {
		return fileHash(path, info)
	}
	var files []string
	err = filepath.WalkDir(path, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			if len(files) == maxHashFiles {
				return fmt.Errorf("%s holds more than %d files", path, maxHashFiles)
			}
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	if len(files) == 0 {
		return "", errors.New(path + " holds no files")
	}
	slices.Sort(files)
	h := sha256.New()
	for _, p := range files {
		fi, err := os.Stat(p)
		if err != nil {
			return "", err
		}
		sum, err := fileHash(p, fi)
		if err != nil {
			return "", err
		}
		rel, _ := filepath.Rel(path, p)
		fmt.Fprintf(h, "%s\x00%s\n", filepath.ToSlash(rel), sum)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func fileHash(path string, info fs.FileInfo) (string, error) {
	if !info.Mode().IsRegular() {
		return "", fmt.Errorf("%s is not a regular file", path)
	}
	h := sha256.New()
	size := info.Size()
	if size <= hashWhole {
		// safefile's reader: a file that says 0 bytes and blocks on read
		// (/proc/kmsg) is refused instead of hanging the launcher.
		r, err := safefile.Open(context.Background(), "model file", path, hashWhole)
		if err != nil {
			return "", err
		}
		defer r.Close()
		if _, err := io.Copy(h, r); err != nil {
			return "", fmt.Errorf("%s: %w", path, err)
		}
		return hex.EncodeToString(h.Sum(nil)), nil
	}
	f, err := safefile.OpenRegular("model file", path) // a FIFO swapped in is refused, not waited on
	if err != nil {
		return "", err
	}
	defer f.Close()
	var sz [8]byte
	binary.LittleEndian.PutUint64(sz[:], uint64(size))
	h.Write(sz[:])
	read := func(off, n int64) error {
		if _, err := io.Copy(h, io.NewSectionReader(f, off, n)); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		return nil
	}
	if err := read(0, hashHead); err != nil {
		return "", err
	}
	for i := int64(0); i < hashSamples; i++ {
		if err := read((i+1)*size/(hashSamples+1), hashChunk); err != nil {
			return "", err
		}
	}
	if err := read(size-hashChunk, hashChunk); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// Size is the size of a model file, or of the regular files under a model
// directory; 0 when it cannot be read. Records and the status page show it.
func Size(path string) int64 {
	var n int64
	filepath.WalkDir(path, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if info, err := d.Info(); err == nil {
				n += info.Size()
			}
		}
		return nil
	})
	return n
}
