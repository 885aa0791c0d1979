package checkpoint

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/speclaunch/speclaunch/internal/key"
)

// Vectors from upstream mlxcel's src/cli/draft_block_policy_tests.rs
// plus the edges of serde_json's grammar that decide unknown vs other.
func TestClassifyConfig(t *testing.T) {
	tests := []struct {
		name, cfg string
		want      key.Quant
	}{
		{"explicit affine (qwen3.5-4b-4bit)", `{"quantization":{"group_size":64,"bits":4,"mode":"affine"}}`, key.QuantAffine},
		{"no mode is affine", `{"quantization":{"group_size":64,"bits":4}}`, key.QuantAffine},
		{"non-string mode is affine", `{"quantization":{"mode":4}}`, key.QuantAffine},
		{"compressed-tensors nvfp4 (Laguna XS 2.1)", `{"quantization_config":{"quant_method":"compressed-tensors","config_groups":{"group_0":{"format":"nvfp4-pack-quantized","weights":{"num_bits":4,"group_size":16}}}}}`, key.QuantNVFP4},
		{"mlx nvfp4", `{"quantization":{"mode":"nvfp4","group_size":16,"bits":4}}`, key.QuantNVFP4},
		{"mxfp4 mode", `{"quantization":{"mode":"mxfp4"}}`, key.QuantOther},
		{"mxfp8 mode", `{"quantization":{"mode":"mxfp8"}}`, key.QuantOther},
		{"mxfp4-pack-quantized", `{"quantization_config":{"config_groups":{"g":{"format":"mxfp4-pack-quantized"}}}}`, key.QuantOther},
		{"vendor fp8", `{"quantization_config":{"quant_method":"fp8","weight_block_size":[128,128]}}`, key.QuantOther},
		{"text_config nesting", `{"model_type":"qwen3_vl","text_config":{"quantization":{"group_size":64,"bits":4}}}`, key.QuantAffine},
		{"root wins over text_config", `{"quantization":{"mode":"nvfp4"},"text_config":{"quantization":{"mode":"affine"}}}`, key.QuantNVFP4},
		{"unquantized is other", `{"model_type":"qwen3","hidden_size":2560}`, key.QuantOther},
		{"capitalized Affine", `{"quantization":{"mode":"Affine"}}`, key.QuantAffine},
		{"NVFP4 upper", `{"quantization":{"mode":"NVFP4"}}`, key.QuantNVFP4},
		{"kelvin sign is not ascii k", `{"quantization":{"mode":"AFFIN\u0130"}}`, key.QuantOther},
		{"first group in file order", `{"quantization_config":{"config_groups":{"z":{"format":"nvfp4"},"a":{"format":"affine"}}}}`, key.QuantNVFP4},
		{"group without format skipped", `{"quantization_config":{"config_groups":{"a":{"weights":{}},"b":{"format":"nvfp4"}}}}`, key.QuantNVFP4},
		{"no group format", `{"quantization_config":{"config_groups":{"a":{}}}}`, key.QuantOther},
		{"quantization not an object falls through", `{"quantization":true,"quantization_config":{"config_groups":{"a":{"format":"nvfp4"}}}}`, key.QuantNVFP4},
		{"quantization null, text_config declares", `{"quantization":null,"text_config":{"quantization_config":{}}}`, key.QuantOther},
		{"text_config not an object", `{"text_config":"x"}`, key.QuantOther},
		{"duplicate key keeps the last value", `{"quantization":{"mode":"affine"},"quantization":{"mode":"nvfp4"}}`, key.QuantNVFP4},
		{"json array is readable", `[1,2]`, key.QuantOther},
		{"json scalar is readable", `3`, key.QuantOther},
		{"not json", `{ not json`, key.QuantUnknown},
		{"empty", ``, key.QuantUnknown},
		{"trailing comma", `{"a":1,}`, key.QuantUnknown},
		{"trailing garbage", `{} x`, key.QuantUnknown},
		{"number out of range", `{"a":1e400}`, key.QuantUnknown},
		{"tiny number is fine", `{"a":1e-400}`, key.QuantOther},
		{"lone surrogate", `{"a":"\ud800"}`, key.QuantUnknown},
		{"surrogate pair is fine", `{"a":"\ud83d\ude00"}`, key.QuantOther},
		{"invalid utf-8", "{\"a\":\"\xff\"}", key.QuantUnknown},
		{"bom", "\ufeff{}", key.QuantUnknown},
		{"control char in string", "{\"a\":\"\x01\"}", key.QuantUnknown},
		{"depth 127 ok", strings.Repeat("[", 127) + strings.Repeat("]", 127), key.QuantOther},
		{"depth 128 refused", strings.Repeat("[", 128) + strings.Repeat("]", 128), key.QuantUnknown},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ClassifyConfig([]byte(tt.cfg)); got != tt.want {
				t.Errorf("ClassifyConfig(%s) = %s, want %s", tt.cfg, got, tt.want)
			}
		})
	}
}

func writeConfig(t testing.TB, raw string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(raw), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestTargetQuant(t *testing.T) {
	affine := writeConfig(t, `{"quantization":{"group_size":64,"bits":4,"mode":"affine"}}`)
	bad := writeConfig(t, `{ not json`)
	// Valid JSON past mlxcel's reader's recursion limit, which a bare
	// "not valid JSON" hid; and a file cut short.
	deep := writeConfig(t, strings.Repeat("[", 100_000)+strings.Repeat("]", 100_000))
	cut := writeConfig(t, `{"quantization": {"bits": 4`)
	ggufDir := t.TempDir()
	writeGGUF(t, filepath.Join(ggufDir, "m-Q8_0.gguf"), q8File())
	two := t.TempDir()
	writeGGUF(t, filepath.Join(two, "a.gguf"), q8File())
	writeGGUF(t, filepath.Join(two, "b.gguf"), q8File())
	split := t.TempDir()
	writeGGUF(t, filepath.Join(split, "m-00001-of-00002.gguf"), ggufSpec{fileType: 15})
	writeGGUF(t, filepath.Join(split, "m-00002-of-00002.gguf"), q8File())
	notGGUF := filepath.Join(t.TempDir(), "weights.bin")
	os.WriteFile(notGGUF, []byte("hello world, not gguf"), 0o644)

	tests := []struct {
		name, path string
		want       key.Quant
		note       string
	}{
		{"mlx dir", affine, key.QuantAffine, "config.json"},
		{"config.json path", filepath.Join(affine, "config.json"), key.QuantAffine, "config.json"},
		{"missing dir", filepath.Join(t.TempDir(), "nope"), key.QuantUnknown, "cannot read target"},
		{"not json", bad, key.QuantUnknown, "not valid JSON"},
		{"nested too deep", deep, key.QuantUnknown, "config.json is not valid JSON to mlxcel's reader (byte 127: recursion limit exceeded)"},
		{"cut short", cut, key.QuantUnknown, "config.json is not valid JSON to mlxcel's reader (byte 27: unterminated object)"},
		{"gguf file", filepath.Join(ggufDir, "m-Q8_0.gguf"), key.QuantQ8_0, "dominant weight type q8_0"},
		{"dir with one gguf", ggufDir, key.QuantQ8_0, "m-Q8_0.gguf"},
		{"dir with two ggufs", two, key.QuantUnknown, "2 .gguf files"},
		{"split: first shard without tensors uses file_type", split, key.QuantQ4_K, "general.file_type 15"},
		{"empty dir", t.TempDir(), key.QuantUnknown, "no config.json and no .gguf"},
		{"not gguf", notGGUF, key.QuantUnknown, "bad magic"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, note := TargetQuant(context.Background(), tt.path)
			if got != tt.want || !strings.Contains(note, tt.note) {
				t.Errorf("TargetQuant = %s, %q; want %s, note containing %q", got, note, tt.want, tt.note)
			}
		})
	}
}

const (
	dsparkConfig = `{"architectures":["Lfm2DSparkDraftModel"],"model_type":"qwen3","block_size":9,
		"dflash_config":{"mask_token_id":125017,"target_layer_ids":[2,9,17,21,27],"num_target_layers":30},"markov_rank":256}`
	plainDFlash   = `{"architectures":["DFlashDraftModel"],"block_size":16,"dflash_config":{"mask_token_id":248070,"target_layer_ids":[1,8,15,22,29]}}`
	musePublished = `{"architectures":["MuseGlimmerAssistantModel"],"block_size":16,"head_dim":128,"hidden_size":6656,
		"intermediate_size":19968,"layer_types":["sliding_attention","sliding_attention","sliding_attention","sliding_attention","sliding_attention"],
		"mask_token_id":201818,"max_position_embeddings":131072,"model_type":"muse_glimmer_assistant","num_attention_heads":32,
		"num_hidden_layers":5,"num_key_value_heads":8,"rms_norm_eps":1e-05,"rope_parameters":{"rope_theta":500000.0,"rope_type":"default"},
		"sliding_window":2048,"target_layer_ids":[1,13,25,37,49]}`
)

func museWith(kv string) string { return strings.TrimSuffix(musePublished, "}") + "," + kv + "}" }

func dsparkWith(kv string) string { return strings.TrimSuffix(dsparkConfig, "}") + "," + kv + "}" }

// Vectors from upstream mlxcel's src/cli/speculative_args_tests.rs and the
// Muse config tests, plus the type strictness each peek inherits from serde.
func TestDeclaredWidth(t *testing.T) {
	tests := []struct {
		name   string
		kind   key.Drafter
		cfg    string
		width  int
		reason string // "" = ok must be false
	}{
		{"qwen3_5_mtp block_size 3", key.MTP, `{"model_type":"qwen3_5_mtp","block_size":3}`, 3, ReasonQwen35MTP},
		{"qwen3_5_mtp without block_size", key.MTP, `{"model_type":"qwen3_5_mtp","mtp_num_hidden_layers":1}`, 0, ""},
		{"qwen3_5_mtp float block_size", key.MTP, `{"model_type":"qwen3_5_mtp","block_size":3.0}`, 0, ""},
		{"qwen3_5_mtp negative block_size", key.MTP, `{"model_type":"qwen3_5_mtp","block_size":-3}`, 0, ""},
		{"qwen3_5_mtp string block_size", key.MTP, `{"model_type":"qwen3_5_mtp","block_size":"3"}`, 0, ""},
		{"qwen3_5_mtp null block_size", key.MTP, `{"model_type":"qwen3_5_mtp","block_size":null}`, 0, ""},
		{"qwen3_5_mtp duplicate block_size", key.MTP, `{"model_type":"qwen3_5_mtp","block_size":3,"block_size":4}`, 0, ""},
		{"qwen3_5_mtp duplicate unknown key is fine", key.MTP, `{"model_type":"qwen3_5_mtp","block_size":3,"x":1,"x":2}`, 3, ReasonQwen35MTP},
		{"qwen3_5_mtp block_size over u32", key.MTP, `{"model_type":"qwen3_5_mtp","block_size":4294967296}`, 0, ""},
		{"qwen3_5_mtp as a sequence", key.MTP, `["qwen3_5_mtp",3]`, 3, ReasonQwen35MTP},
		{"qwen3_5_mtp for a dflash kind", key.DFlash, `{"model_type":"qwen3_5_mtp","block_size":3}`, 0, ""},
		{"inkling num_mtp_layers 8", key.MTP, `{"model_type":"inkling","text_config":{"num_mtp_layers":8}}`, 10, ReasonInkling},
		{"inkling float layers", key.MTP, `{"text_config":{"num_mtp_layers":8.0}}`, 0, ""},
		{"inkling layers at root ignored", key.MTP, `{"num_mtp_layers":8}`, 0, ""},
		{"glm4 moe lite block_size 2", key.MTP, `{"model_type":"glm4_moe_lite_mtp","block_size":2}`, 2, ReasonGLM4MTP},
		{"gemma4_assistant block_size 7", key.MTP, `{"model_type":"gemma4_assistant","block_size":7}`, 0, ""},
		{"dspark published", key.DFlash, dsparkConfig, 8, ReasonDSpark},
		{"dspark as kind dspark", key.DSpark, dsparkConfig, 8, ReasonDSpark},
		{"dspark runtime_block_size 12 capped at trained 10", key.DFlash, dsparkWith(`"runtime_block_size":12`), 10, ReasonDSpark},
		{"dspark runtime_block_size 6", key.DFlash, dsparkWith(`"runtime_block_size":6`), 6, ReasonDSpark},
		{"dspark runtime null is default", key.DFlash, dsparkWith(`"runtime_block_size":null`), 8, ReasonDSpark},
		{"dspark capped at 32", key.DFlash, `{"markov_rank":1,"block_size":99,"runtime_block_size":64}`, 32, ReasonDSpark},
		{"dspark bad field type", key.DFlash, dsparkWith(`"hidden_size":"big"`), 0, ""},
		{"dspark bad nested id", key.DFlash, `{"markov_rank":1,"block_size":9,"dflash_config":{"target_layer_ids":[-1]}}`, 0, ""},
		{"dspark for an mtp kind", key.MTP, dsparkConfig, 0, ""},
		{"plain dflash", key.DFlash, plainDFlash, 0, ""},
		{"markov_rank 0", key.DFlash, `{"markov_rank":0,"block_size":9}`, 0, ""},
		{"muse published", key.DFlash, musePublished, 16, ReasonMuse},
		{"muse runtime 8", key.DFlash, museWith(`"runtime_block_size":8`), 8, ReasonMuse},
		{"muse nested dflash_config", key.DFlash, `{"model_type":"muse_glimmer_assistant","hidden_size":8,"intermediate_size":16,"num_hidden_layers":2,
			"num_attention_heads":2,"num_key_value_heads":1,"head_dim":4,"layer_types":["sliding_attention","sliding_attention"],
			"dflash_config":{"mask_token_id":5,"target_layer_ids":[1,3],"block_size":6,"runtime_block_size":4,"num_target_layers":4}}`, 4, ReasonMuse},
		{"muse full_attention layer refused", key.DFlash, strings.Replace(musePublished, `"sliding_attention","sliding_attention","sliding_attention"`, `"full_attention","sliding_attention","sliding_attention"`, 1), 0, ""},
		{"muse ids past num_target_layers", key.DFlash, museWith(`"num_target_layers":49`), 0, ""},
		{"muse unordered ids", key.DFlash, strings.Replace(musePublished, "[1,13,25,37,49]", "[13,1,25,37,49]", 1), 0, ""},
		{"muse missing head_dim", key.DFlash, strings.Replace(musePublished, `"head_dim":128,`, "", 1), 0, ""},
		{"muse heads not divisible", key.DFlash, strings.Replace(musePublished, `"num_key_value_heads":8`, `"num_key_value_heads":5`, 1), 0, ""},
		{"muse block_size 1", key.DFlash, strings.Replace(musePublished, `"block_size":16`, `"block_size":1`, 1), 0, ""},
		{"muse runtime 1", key.DFlash, museWith(`"runtime_block_size":1`), 0, ""},
		{"muse mask outside vocab", key.DFlash, museWith(`"vocab_size":1000`), 0, ""},
		{"muse arch only, other model_type", key.DFlash, strings.Replace(musePublished, `"model_type":"muse_glimmer_assistant"`, `"model_type":"x"`, 1), 0, ""},
		{"muse arch only, no model_type", key.DFlash, strings.Replace(musePublished, `"model_type":"muse_glimmer_assistant",`, "", 1), 16, ReasonMuse},
		{"muse block_size default 16", key.DFlash, strings.Replace(musePublished, `"block_size":16,`, "", 1), 16, ReasonMuse},
		{"muse bad quantization", key.DFlash, museWith(`"quantization":{"bits":4}`), 0, ""},
		{"muse quantization ok", key.DFlash, museWith(`"quantization":{"group_size":64,"bits":4}`), 16, ReasonMuse},
		{"not json", key.DFlash, `{ not json`, 0, ""},
		{"draft kind never declares", key.Draft, `{"model_type":"qwen3_5_mtp","block_size":3}`, 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, reason, ok := DeclaredWidth(context.Background(), tt.kind, writeConfig(t, tt.cfg))
			if ok != (tt.reason != "") || w != tt.width || reason != tt.reason {
				t.Errorf("DeclaredWidth = %d, %q, %v; want %d, %q", w, reason, ok, tt.width, tt.reason)
			}
		})
	}
	if w, r, ok := DeclaredWidth(context.Background(), key.MTP, filepath.Join(t.TempDir(), "missing")); ok {
		t.Errorf("missing dir declared %d (%s)", w, r)
	}
}

func TestDrafterKind(t *testing.T) {
	tests := []struct {
		name string
		cfg  string
		want key.Drafter // "" = not identified
	}{
		{"qwen3_5_mtp", `{"model_type":"qwen3_5_mtp","block_size":3}`, key.MTP},
		{"gemma4_assistant", `{"model_type":"gemma4_assistant","block_size":7}`, key.MTP},
		{"gemma4_unified_assistant", `{"model_type":"gemma4_unified_assistant"}`, key.MTP},
		{"glm4_moe_lite_mtp", `{"model_type":"glm4_moe_lite_mtp"}`, key.MTP},
		{"muse", musePublished, key.DFlash},
		{"dspark (markov_rank) runs as dflash", dsparkConfig, key.DFlash},
		{"DFlashDraftModel", plainDFlash, key.DFlash},
		{"unknown model_type", `{"model_type":"llama"}`, ""},
		{"model_type with unparseable block_size", `{"model_type":"gemma4_assistant","block_size":"7"}`, ""},
		{"not json", `{ not json`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := DrafterKind(context.Background(), writeConfig(t, tt.cfg))
			if got != tt.want || ok != (tt.want != "") {
				t.Errorf("DrafterKind = %q, %v; want %q", got, ok, tt.want)
			}
		})
	}
	if _, ok := DrafterKind(context.Background(), filepath.Join(t.TempDir(), "missing")); ok {
		t.Error("missing path identified a kind")
	}
	for arch, want := range map[string]key.Drafter{"llama": key.Draft, "dflash": key.DFlash, "eagle3": key.Eagle3, "gemma4-assistant": key.MTP} {
		p := filepath.Join(t.TempDir(), "d.gguf")
		spec := q8File()
		spec.arch = arch
		writeGGUF(t, p, spec)
		if got, ok := DrafterKind(context.Background(), p); got != want || !ok {
			t.Errorf("gguf arch %s: DrafterKind = %q, %v; want %q", arch, got, ok, want)
		}
		if got, ok := DrafterKind(context.Background(), filepath.Dir(p)); got != want || !ok {
			t.Errorf("gguf dir arch %s: DrafterKind = %q, %v; want %q", arch, got, ok, want)
		}
	}
}

func FuzzClassifyConfig(f *testing.F) {
	for _, s := range []string{`{"quantization":{"mode":"affine"}}`, `{"text_config":{"quantization_config":{"config_groups":{"a":{"format":"NVFP4"}}}}}`,
		`{ not json`, `[1e400]`, `"\ud800"`, musePublished, dsparkConfig} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		q := ClassifyConfig(raw)
		switch q {
		case key.QuantAffine, key.QuantNVFP4, key.QuantOther, key.QuantUnknown:
		default:
			t.Fatalf("ClassifyConfig returned %q, outside upstream's four classes", q)
		}
		// Anything we read must be JSON to encoding/json too.
		if q != key.QuantUnknown && !jsonValid(raw) {
			t.Fatalf("accepted invalid JSON %q", raw)
		}
	})
}

func FuzzDeclaredWidth(f *testing.F) {
	for _, s := range []string{dsparkConfig, musePublished, plainDFlash, `{"model_type":"qwen3_5_mtp","block_size":3}`,
		`{"text_config":{"num_mtp_layers":8}}`, `["qwen3_5_mtp",3]`, `{"markov_rank":1,"block_size":18446744073709551615}`} {
		f.Add([]byte(s), uint8(0))
		f.Add([]byte(s), uint8(1))
	}
	kinds := []key.Drafter{key.DFlash, key.MTP, key.DSpark, key.Draft}
	f.Fuzz(func(t *testing.T, raw []byte, k uint8) {
		dir := writeConfig(t, string(raw))
		kind := kinds[int(k)%len(kinds)]
		w, reason, ok := DeclaredWidth(context.Background(), kind, dir)
		if !ok {
			if w != 0 || reason != "" {
				t.Fatalf("no declaration but width %d reason %q", w, reason)
			}
			return
		}
		if w < 0 || w > 1<<32-1 || reason == "" {
			t.Fatalf("width %d reason %q", w, reason)
		}
		if reason == ReasonDSpark && w > dsparkMaxVerifyWidth {
			t.Fatalf("DSpark width %d over the cap", w)
		}
		if !jsonValid(raw) {
			t.Fatalf("declared a width from invalid JSON %q", raw)
		}
		DrafterKind(context.Background(), dir) // must not panic
	})
}

// Issue 33: a block_size no peek reads (-1, a string, past u32, a Muse
// block_size under 2) was dropped without a word; Declare says so, with the
// fix, and never for a value a peek read or a family that has none.
func TestDeclareUnread(t *testing.T) {
	tests := []struct {
		name string
		kind key.Drafter
		cfg  string
		want string // a part of Unread; "" = none
	}{
		{"qwen -1", key.MTP, `{"model_type":"qwen3_5_mtp","block_size":-1}`, "block_size -1 is negative: no width is read from it; set a width 2 to 256 or remove the key"},
		{"qwen 3.0", key.MTP, `{"model_type":"qwen3_5_mtp","block_size":3.0}`, "block_size 3.0 is not an integer as written"},
		{"qwen -2.5", key.MTP, `{"model_type":"qwen3_5_mtp","block_size":-2.5}`, "is negative"},
		{"qwen string", key.MTP, `{"model_type":"qwen3_5_mtp","block_size":"4"}`, `block_size "4" is a string`},
		{"qwen bool", key.MTP, `{"model_type":"qwen3_5_mtp","block_size":true}`, "is true or false"},
		{"qwen list", key.MTP, `{"model_type":"qwen3_5_mtp","block_size":[4]}`, "block_size […] is a list or a table"},
		{"qwen past u32", key.MTP, `{"model_type":"qwen3_5_mtp","block_size":4294967296}`, "is above 4294967295"},
		{"qwen past u64", key.MTP, `{"model_type":"qwen3_5_mtp","block_size":100000000000000000000}`, "is above 4294967295"},
		{"glm -1", key.MTP, `{"model_type":"glm4_moe_lite_mtp","block_size":-1}`, "set a width 2 to 256 or remove the key"},
		{"qwen null is unset", key.MTP, `{"model_type":"qwen3_5_mtp","block_size":null}`, ""},
		{"qwen 3 is read", key.MTP, `{"model_type":"qwen3_5_mtp","block_size":3}`, ""},
		{"qwen 0 is read (the plan judges it)", key.MTP, `{"model_type":"qwen3_5_mtp","block_size":0}`, ""},
		{"qwen for a dflash kind: its kind was not read", key.DFlash, `{"model_type":"qwen3_5_mtp","block_size":-1}`, "nor the kind from model_type qwen3_5_mtp (so dflash)"},
		{"qwen for a draft kind", key.Draft, `{"model_type":"qwen3_5_mtp","block_size":-1}`, ""},
		{"gemma4 block_size is no width", key.MTP, `{"model_type":"gemma4_assistant","block_size":-1}`, ""},
		{"dspark -1", key.DFlash, strings.Replace(dsparkConfig, `"block_size":9`, `"block_size":-1`, 1), "set the proposals, 1 to 31"},
		{"dspark null", key.DSpark, strings.Replace(dsparkConfig, `"block_size":9`, `"block_size":null`, 1), "is null"},
		{"dspark read", key.DFlash, dsparkConfig, ""},
		{"dspark other field bad", key.DFlash, dsparkWith(`"hidden_size":"big"`), ""},
		{"muse 1", key.DFlash, strings.Replace(musePublished, `"block_size":16`, `"block_size":1`, 1), "block_size 1 is below 2"},
		{"muse -1", key.DFlash, strings.Replace(musePublished, `"block_size":16`, `"block_size":-1`, 1), "is negative"},
		{"muse valid, other field bad", key.DFlash, strings.Replace(musePublished, `"head_dim":128,`, "", 1), ""},
		{"plain dflash", key.DFlash, plainDFlash, ""},
		{"inkling -1", key.MTP, `{"model_type":"inkling","text_config":{"num_mtp_layers":-1}}`, "text_config.num_mtp_layers -1 is negative: no width is read from it; set the MTP layer count, 0 to 254"},
		{"inkling 8.0", key.MTP, `{"text_config":{"num_mtp_layers":8.0}}`, "is not an integer as written"},
		{"inkling past u32", key.MTP, `{"text_config":{"num_mtp_layers":4294967294}}`, "is above 4294967293"},
		{"inkling 8 is read", key.MTP, `{"text_config":{"num_mtp_layers":8}}`, ""},
		{"inkling null is unset", key.MTP, `{"text_config":{"num_mtp_layers":null}}`, ""},
		{"inkling unread beside a qwen width", key.MTP, `{"model_type":"qwen3_5_mtp","block_size":3,"text_config":{"num_mtp_layers":-1}}`, ""},
		{"inkling for a dflash kind", key.DFlash, `{"text_config":{"num_mtp_layers":-1}}`, ""},
		{"not json", key.MTP, `{"model_type":"qwen3_5_mtp","block_size":-1`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Declare(context.Background(), tt.kind, writeConfig(t, tt.cfg)).Unread
			if (tt.want == "") != (got == "") || !strings.Contains(got, tt.want) {
				t.Errorf("Unread = %q, want it to hold %q", got, tt.want)
			}
		})
	}
}
