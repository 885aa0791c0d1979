package bench

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/speclaunch/speclaunch/internal/safefile"
	"github.com/speclaunch/speclaunch/internal/typo"
)

// MaxPromptBytes caps one prompt file: a prompt is a few hundred tokens, and
// a file that is not (a model, a device) must fail at once, not be read
// into memory.
const MaxPromptBytes = safefile.PromptLimit

// MaxPrompts caps a set: every arm sends every prompt every round.
const MaxPrompts = 64

//go:embed prompts/code prompts/prose
var shipped embed.FS

// ShippedSets are the prompt sets built into the binary (internal/bench/prompts).
var ShippedSets = []string{"code", "prose"}

// ShippedSet returns a built-in prompt set by name.
func ShippedSet(name string) ([]Prompt, error) {
	if !slices.Contains(ShippedSets, name) {
		return nil, fmt.Errorf("no shipped prompt set %q (shipped: %s)", name, strings.Join(ShippedSets, ", "))
	}
	ents, err := fs.ReadDir(shipped, "prompts/"+name)
	if err != nil {
		return nil, err
	}
	var out []Prompt
	for _, e := range ents {
		b, err := fs.ReadFile(shipped, path.Join("prompts", name, e.Name()))
		if err != nil {
			return nil, err
		}
		out = append(out, Prompt{Name: e.Name(), Text: string(b)})
	}
	return out, nil
}

// ReadPromptFile reads one prompt: a regular file of at most MaxPromptBytes
// of UTF-8 text, not empty, opened as internal/safefile opens every file an
// operator names (a directory, FIFO or device is refused before it is read,
// and ctx ending stops the read). Errors name the file.
func ReadPromptFile(ctx context.Context, name string) (string, error) {
	return ReadTextFile(ctx, "prompt file", name)
}

// ReadTextFile reads a small UTF-8 text file under the prompt file's cap,
// as what ("notes file"), so that its errors name it as what it is.
func ReadTextFile(ctx context.Context, what, name string) (string, error) {
	b, err := safefile.ReadFile(ctx, what, name, MaxPromptBytes)
	if err != nil {
		return "", err
	}
	switch {
	case len(strings.TrimSpace(string(b))) == 0:
		return "", fmt.Errorf("%s is empty", name)
	case !utf8.Valid(b):
		return "", fmt.Errorf("%s is not UTF-8 text", name)
	}
	return string(b), nil
}

// ReadPromptDir reads a prompt set: every entry of dir whose name does not
// start with "." must be a regular file and is one prompt, in name order.
func ReadPromptDir(ctx context.Context, dir string) ([]Prompt, error) {
	info, err := os.Stat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		mean := ""
		if near := typo.NearestName(dir, ShippedSets); near != "" {
			mean = "did you mean " + near + "? "
		}
		return nil, fmt.Errorf("%s is neither a directory nor a shipped set (%sshipped: %s): give --prompts %s, or the path of a directory of prompt files", dir, mean, strings.Join(ShippedSets, ", "), strings.Join(ShippedSets, " or --prompts "))
	}
	if err != nil {
		return nil, err
	}
	if !info.IsDir() {
		return nil, fmt.Errorf("%s is not a directory: --prompts takes a directory of prompt files (or a shipped set: %s); for one prompt use --prompt-file", dir, strings.Join(ShippedSets, ", "))
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []Prompt
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".") {
			continue
		}
		if len(out) == MaxPrompts {
			return nil, fmt.Errorf("%s holds more than %d prompts", dir, MaxPrompts)
		}
		text, err := ReadPromptFile(ctx, filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		out = append(out, Prompt{Name: e.Name(), Text: text})
	}
	if len(out) == 0 {
		return nil, errors.New(dir + " holds no prompt files")
	}
	return out, nil
}
