package sim

import (
	"hash/fnv"
	"math/rand/v2"
	"strings"
)

// vocab is the sim's whole vocabulary. Token ids are tokenBase + index.
var vocab = []string{
	" the", " a", " of", " to", " and", " in", " is", " for", " that", " with",
	" draft", " token", " verify", " round", " width", " block", " target", " model",
	" accept", " reject", " kernel", " batch", " cache", " prefill", " decode", " sync",
	" return", " if", " else", " for", " while", " def", " self", " value", " result", " count",
	"(", ")", ":", ",", ".", "\n", "    ", " =", " +", " 1", " 0", " 2",
	" speculative", " simulated", " engine", " launcher", " policy", " measure", " GPU", " rate",
	"ing", "ed", "s", "er", "ly", " x", " y", " i",
}

const tokenBase = 1000

// hashPrompt keys everything that must depend on the prompt only.
func hashPrompt(prompt string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(prompt))
	return h.Sum64()
}

// tokenStream yields the synthetic greedy continuation of one prompt. It is
// keyed by the prompt alone, never by width, seed or request, so that the
// text is byte-identical across widths and runs (the property a bench checks
// for greedy decoding).
type tokenStream struct{ rng *rand.Rand }

func newTokenStream(prompt string) *tokenStream {
	return &tokenStream{rng: rand.New(rand.NewPCG(hashPrompt(prompt), 0x73696d746f6b656e))}
}

type token struct {
	ID   int
	Text string
}

func (t *tokenStream) next() token {
	i := t.rng.IntN(len(vocab))
	return token{ID: tokenBase + i, Text: vocab[i]}
}

// countPromptTokens approximates a tokenizer: one BOS plus one token per
// whitespace-separated word, as the llama golden captures count "hello world"
// as 3.
func countPromptTokens(prompt string) int { return 1 + len(strings.Fields(prompt)) }
