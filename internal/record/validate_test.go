package record

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// valid is the smallest record Validate accepts: a key, classic and a width.
func valid() *Record {
	return &Record{Schema: Schema, Name: "r",
		Key: Key{Engine: "llama.cpp", Drafter: "draft", Capability: "9.0", Quant: "q8_0"},
		Arms: []Arm{
			{Label: "classic", Kind: KindClassic, Status: StatusOK, Runs: []Run{{Phase: PhaseMeasured, TokPerS: 100, WallS: 2, CompletionTokens: 200}}},
			{Label: "width 4", Kind: KindWidth, Width: 4, Status: StatusOK, Runs: []Run{{Phase: PhaseMeasured, TokPerS: 120, WallS: 2, CompletionTokens: 240}}},
		}}
}

func TestValidate(t *testing.T) {
	runs := func(n int) []Run { return make([]Run, n) }
	for _, tc := range []struct {
		name  string
		edit  func(r *Record)
		field string // "" = valid
		msg   string
	}{
		{"valid", func(*Record) {}, "", ""},
		{"schema 0", func(r *Record) { r.Schema = 0 }, "schema", "is 0; this speclaunch reads record schema 1"},
		{"schema 2", func(r *Record) { r.Schema = 2 }, "schema", "is 2"},
		{"name with a directory", func(r *Record) { r.Name = "../../etc/x" }, "name", "is not a file name"},
		{"name with an escape", func(r *Record) { r.Name = "r\x1b[2J" }, "name", "control character (U+001B at byte 1)"},
		{"title with a newline", func(r *Record) { r.Title = "a\nb" }, "title", "control character (U+000A"},
		{"note with a C1 control", func(r *Record) { r.Notes = []string{"ok", "x\u009by"} }, "notes[1]", "control character (U+009B"},
		{"title at the bound", func(r *Record) { r.Title = strings.Repeat("é", MaxText/2) }, "", ""},
		{"title over the bound", func(r *Record) { r.Title = strings.Repeat("t", MaxText+1) }, "title", "is 4097 bytes long, above the 4096"},
		{"name over the bound", func(r *Record) { r.Name = strings.Repeat("n", 256) }, "name", "above the 255"},
		{"too many notes", func(r *Record) { r.Notes = make([]string, MaxNotes+1) }, "notes", "holds 65 notes"},
		{"empty key", func(r *Record) { r.Key = Key{} }, "key.engine", "is empty"},
		{"unknown engine", func(r *Record) { r.Key.Engine = "tgi" }, "key.engine", `unknown engine "tgi"`},
		{"bad capability", func(r *Record) { r.Key.Capability = "twelve" }, "key.capability", ""},
		{"no arms", func(r *Record) { r.Arms = nil }, "arms", "is empty"},
		{"too many arms", func(r *Record) { r.Arms = append(r.Arms, make([]Arm, MaxArms)...) }, "arms", "holds 302 arms, above the 300"},
		{"width 1", func(r *Record) { r.Arms[1].Width = 1 }, "arms[1].width", "1 is outside 2 to 256"},
		{"width 0 on a width arm", func(r *Record) { r.Arms[1].Width = 0 }, "arms[1].width", "0 is outside 2 to 256"},
		{"width 10^9", func(r *Record) { r.Arms[1].Width = 1_000_000_000 }, "arms[1].width", "1000000000 is outside 2 to 256"},
		{"width 256", func(r *Record) { r.Arms[1].Width = 256 }, "", ""},
		{"width 257", func(r *Record) { r.Arms[1].Width = 257 }, "arms[1].width", "257 is outside"},
		{"engine width 1", func(r *Record) { r.Arms[1].EngineWidth = 1 }, "arms[1].engine_width", "1 is outside"},
		{"classic with a width", func(r *Record) { r.Arms[0].Width = 4 }, "arms[0].width", "classic's width is 0"},
		{"unknown kind", func(r *Record) { r.Arms[1].Kind = "turbo" }, "arms[1].kind", `"turbo" is not an arm kind`},
		{"unknown status", func(r *Record) { r.Arms[1].Status = "" }, "arms[1].status", `"" is not an arm status`},
		{"runs per arm at the bound", func(r *Record) { r.Arms[1].Runs = runs(MaxRunsPerArm) }, "", ""},
		{"runs per arm over the bound", func(r *Record) { r.Arms[1].Runs = runs(MaxRunsPerArm + 1) }, "arms[1].runs", "holds 1001 runs, above the 1000"},
		{"runs in all over the bound", func(r *Record) {
			for range MaxRuns / MaxRunsPerArm {
				r.Arms = append(r.Arms, Arm{Label: "w", Kind: KindWidth, Width: 5, Status: StatusOK, Runs: runs(MaxRunsPerArm)})
			}
		}, "arms", "hold 10002 runs in all, above the 10000"},
		{"rate of its own figures", func(r *Record) { r.Arms[1].Runs[0].WallS, r.Arms[1].Runs[0].CompletionTokens = 2, 240 }, "", ""},
		{"rate against its own figures", func(r *Record) { r.Arms[1].Runs[0].WallS, r.Arms[1].Runs[0].CompletionTokens = 2, 200 }, "arms[1].runs[0].tok_per_s", "is 120, but the run's completion_tokens over its wall_s is 100"},
		{"a rate without its wall time", func(r *Record) { r.Arms[1].Runs[0].WallS, r.Arms[1].Runs[0].CompletionTokens = 0, 240 }, "arms[1].runs[0].tok_per_s", "is 120 with wall_s 0 and completion_tokens 240"},
		{"a rate without its tokens", func(r *Record) { r.Arms[1].Runs[0].CompletionTokens = 0 }, "arms[1].runs[0].tok_per_s", "is 120 with wall_s 2 and completion_tokens 0"},
		{"negative rate", func(r *Record) { r.Arms[1].Runs[0].TokPerS = -1 }, "arms[1].runs[0].tok_per_s", "is -1"},
		// Tokens take time, and no run is faster than any engine or longer
		// than a day: a record edited so passed and policy propose printed
		// its 300-digit medians.
		{"tokens in no time", func(r *Record) {
			r.Arms[1].Runs[0].WallS, r.Arms[1].Runs[0].TokPerS, r.Arms[1].Runs[0].CompletionTokens = 0, 0, 200
		}, "arms[1].runs[0].wall_s", "is 0 with completion_tokens 200: tokens take time to stream"},
		{"tokens at a rate of 0", func(r *Record) { r.Arms[1].Runs[0].TokPerS = 0 }, "arms[1].runs[0].tok_per_s", "is 0, but the run's completion_tokens over its wall_s is 120"},
		{"a rate beyond any engine", func(r *Record) {
			r.Arms[1].Runs[0].WallS, r.Arms[1].Runs[0].CompletionTokens, r.Arms[1].Runs[0].TokPerS = 1e-300, 1000, 1e303
		}, "arms[1].runs[0].tok_per_s", "is 1e+303: above 1e+06 tokens/s"},
		{"tokens in the least time a float holds", func(r *Record) {
			r.Arms[1].Runs[0].WallS, r.Arms[1].Runs[0].CompletionTokens, r.Arms[1].Runs[0].TokPerS = 5e-324, 1000, 0
		}, "arms[1].runs[0].tok_per_s", "is 0, but the run's completion_tokens over its wall_s is +Inf"},
		{"a rate at the bound", func(r *Record) {
			r.Arms[1].Runs[0].WallS, r.Arms[1].Runs[0].CompletionTokens, r.Arms[1].Runs[0].TokPerS = 0.001, 1000, 1e6
		}, "", ""},
		{"a run of a day", func(r *Record) {
			r.Arms[1].Runs[0].WallS, r.Arms[1].Runs[0].CompletionTokens, r.Arms[1].Runs[0].TokPerS = 86400, 86400, 1
		}, "", ""},
		{"a run past a day", func(r *Record) {
			r.Arms[1].Runs[0].WallS, r.Arms[1].Runs[0].CompletionTokens, r.Arms[1].Runs[0].TokPerS = 86401, 86401, 1
		}, "arms[1].runs[0].wall_s", "is 86401: above 86400 s (a day)"},
		{"a stored median beyond any engine", func(r *Record) { r.Arms[1].Stats.Median = 1e303 }, "arms[1].stats.median", "is 1e+303: a rate from 0 to 1e+06 tokens/s"},
		{"a negative stored minimum", func(r *Record) { r.Arms[0].Stats.Min = -1 }, "arms[0].stats.min", "is -1"},
		{"a level's run", func(r *Record) {
			r.Levels = []Level{{Concurrency: 1, Arms: valid().Arms}}
			r.Levels[0].Arms[0].Runs[0].WallS, r.Levels[0].Arms[0].Runs[0].TokPerS = 0, 0
		}, "levels[0].arms[0].runs[0].wall_s", "is 0 with completion_tokens 200"},
		// A load sweep's levels, each fault said as what it is: a sweep
		// without them was told "arms: is empty", and a level repeated or
		// out of order that "levels are whole numbers of clients,
		// ascending, from 1", as a level of 0 is.
		{"a sweep's levels", func(r *Record) {
			r.Levels, r.Arms = []Level{{Concurrency: 1, Arms: valid().Arms}, {Concurrency: 4, Arms: valid().Arms}}, nil
		}, "", ""},
		{"a sweep without its levels", func(r *Record) {
			r.Arms, r.Method.Load = nil, &LoadMethod{Levels: []int{1, 4}}
		}, "levels", "is missing or empty, but the record is a load sweep (it has method.load or earned_schedule), whose arms are kept level by level; restore the record, or measure again with speclaunch tune (or speclaunch bench --concurrency)"},
		{"a sweep without its levels or method", func(r *Record) { r.Arms, r.Earned = nil, &Earned{} }, "levels", "is missing or empty, but the record is a load sweep"},
		{"a level of 0", func(r *Record) { r.Levels, r.Arms = []Level{{Concurrency: 0, Arms: valid().Arms}}, nil }, "levels[0].concurrency", "is 0: a level is a whole number of clients, from 1"},
		{"a level repeated", func(r *Record) {
			r.Levels, r.Arms = []Level{{Concurrency: 1, Arms: valid().Arms}, {Concurrency: 1, Arms: valid().Arms}}, nil
		}, "levels[1].concurrency", "is 1, as levels[0].concurrency is: each level is measured once, the levels ascending"},
		{"levels out of order", func(r *Record) {
			r.Levels, r.Arms = []Level{{Concurrency: 4, Arms: valid().Arms}, {Concurrency: 2, Arms: valid().Arms}}, nil
		}, "levels[1].concurrency", "is 2, below levels[0].concurrency (4): the levels ascend"},
		// A bidirectional control reorders what a terminal shows after it,
		// as policy list and explain print a record's text.
		{"title with a right-to-left override", func(r *Record) { r.Title = "a\u202Eb" }, "title", "bidirectional control character (U+202E at byte 1)"},
		{"note with an isolate", func(r *Record) { r.Notes = []string{"ok", "x\u2066y\u2069"} }, "notes[1]", "bidirectional control character (U+2066 at byte 1)"},
		{"name with an embedding", func(r *Record) { r.Name = "r\u202A" }, "name", "bidirectional control character (U+202A"},
		{"launcher with a pop isolate", func(r *Record) { r.Launcher = "speclaunch \u2069" }, "launcher", "bidirectional control character (U+2069"},
		// Every character that does not print, by quote.Printable's one rule
		// (a line separator and a left-to-right mark passed before).
		{"title with a line separator", func(r *Record) { r.Title = "a\u2028b" }, "title", "a character that does not print (U+2028 at byte 1)"},
		{"note with a left-to-right mark", func(r *Record) { r.Notes = []string{"x\u200Ey"} }, "notes[0]", "a character that does not print (U+200E at byte 1)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := valid()
			tc.edit(r)
			err := Validate(r)
			if tc.field == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var fe *FieldError
			if !errors.As(err, &fe) || fe.Field != tc.field || !strings.Contains(fe.Msg, tc.msg) || !errors.Is(err, ErrInvalid) {
				t.Errorf("error %v, want field %s and %q", err, tc.field, tc.msg)
			}
		})
	}
}

func TestDecode(t *testing.T) {
	// A record at the limits, every field of every run given and each run
	// at the widest width, is not refused by the bound on its size.
	var full Run
	v := reflect.ValueOf(&full).Elem()
	for i := range v.NumField() {
		switch f := v.Field(i); f.Kind() {
		case reflect.Int, reflect.Int64:
			f.SetInt(1)
		case reflect.Float64:
			f.SetFloat(1.5)
		case reflect.String:
			f.SetString("x")
		case reflect.Slice:
			f.Set(reflect.ValueOf(make([]int, 255)))
		}
	}
	big := Record{Schema: Schema}
	for range MaxArms {
		big.Arms = append(big.Arms, Arm{Runs: slices.Repeat([]Run{full}, MaxRuns/MaxArms)})
	}
	b, err := json.Marshal(big)
	if err != nil {
		t.Fatal(err)
	}
	if err := checkSize(b); err != nil {
		t.Errorf("a record of %d arms and %d runs: %v", MaxArms, MaxRuns, err)
	}
	for _, tc := range []struct {
		name, data, want string
	}{
		{"null", "null", "(top level): a record is a JSON object"},
		{"empty", "  ", "(top level): a record is a JSON object"},
		{"array", "[]", "(top level): a record is a JSON object"},
		{"empty object", "{}", "schema: is 0"},
		{"wrong type", `{"schema": "one"}`, "schema: is string, want a whole number"},
		{"truncated", `{"schema": 1, "arms": [`, "(top level): ends early, inside a value, at byte 23 (truncated?): restore the file"},
		// Counted before anything is built: each empty arm would be a
		// whole Arm struct (the first cut, two million of them, took
		// gigabytes).
		{"a flood of empty arms", `{"schema":1,"arms":[` + strings.Repeat("{},", maxContainers) + `{}]}`, "(top level): holds more than"},
		{"a flood of values", `{"schema":1,"arms":[{"runs":[],"argv":[` + strings.Repeat(`"x",`, maxValues) + `"x"]}]}`, "(top level): holds more than"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := Decode([]byte(tc.data)); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want %q", err, tc.want)
			}
		})
	}
}

// jsonSize counts as json.Decoder.Token does (keys, scalars and opening
// brackets), over escapes, numbers, literals and the committed records.
func TestJSONSizeCountsAsToken(t *testing.T) {
	docs := []string{
		`{}`, `[]`, `null`, `{"a":1}`, `{"a":[1,-2.5e+3,true,false,null,"x"]}`,
		`{"q\"uote":"back\\slash\\","u":"\u00e9 é","nested":[[{}],[[]],{"k":{"k":[0]}}]}`,
		" {\n\t\"spaced\" :\r\n [ 1 , 2 ] } ",
	}
	recs, _ := filepath.Glob("../../docs/benchmark_results/*.json")
	for _, p := range recs {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, string(b))
	}
	if len(recs) == 0 {
		t.Fatal("no committed records found")
	}
	for _, doc := range docs {
		wantV, wantC := 0, 0
		d := json.NewDecoder(strings.NewReader(doc))
		for {
			tok, err := d.Token()
			if err != nil {
				break
			}
			switch tok {
			case json.Delim('}'), json.Delim(']'):
				continue
			case json.Delim('{'), json.Delim('['):
				wantC++
			}
			wantV++
		}
		if v, c := jsonSize([]byte(doc), math.MaxInt, math.MaxInt); v != wantV || c != wantC {
			t.Errorf("%.60q: %d values, %d containers; Token counts %d and %d", doc, v, c, wantV, wantC)
		}
	}
}

// Issue 33: a record holding a 10^6-digit number gave a 1,000,217-byte
// line naming a Go struct field; the error names the record's field, says
// what it should hold, and stays short.
func TestDecodeWordsTypeErrors(t *testing.T) {
	huge := `{"schema":1,"arms":[{"runs":[{"tok_per_s":1` + strings.Repeat("0", 1_000_000) + `}]}]}`
	for in, want := range map[string]string{
		huge:                     "arms.runs.tok_per_s: is \"number 1",
		`{"schema":"one"}`:       "schema: is string, want a whole number in range",
		`{"schema":1,"arms":{}}`: "arms: is object, want a list",
		`{"schema":1,"arms":[}`:  "(top level): is not valid JSON at byte",
	} {
		_, err := Decode([]byte(in))
		if err == nil || len(err.Error()) > 300 || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "Go struct") || strings.Contains(err.Error(), "float64") {
			t.Errorf("%.40s: %d-byte error %.300q, want %q", in, len(fmt.Sprint(err)), err, want)
		}
	}
}

// A record cut short, mid-number or between values, is said to end early
// and told to be restored or measured again, where it was "is not valid
// JSON at byte 18122 (invalid character ' ' after decimal point in
// numeric literal)" at a byte past its end. A syntax error inside it, or
// at its last byte, is still one.
func TestDecodeSaysATruncatedRecordEndsEarly(t *testing.T) {
	const early = "(top level): ends early, inside a value, at byte %d (truncated?): restore the file from where it was copied (git, a backup), or re-run the bench or tune that wrote it"
	for _, c := range []struct {
		name, data, want string
	}{
		{"after a decimal point", `{"schema": 1, "ratio": 1.`, fmt.Sprintf(early, 25)},
		{"after a decimal point and a newline", "{\"schema\": 1, \"ratio\": 1.\n", fmt.Sprintf(early, 25)},
		{"inside a string", `{"schema": 1, "name": "tun`, fmt.Sprintf(early, 26)},
		{"inside a literal", `{"schema": 1, "complete": tr`, fmt.Sprintf(early, 28)},
		{"after a comma", "{\"schema\": 1,\n  ", fmt.Sprintf(early, 13)},
		{"a bad number inside", `{"schema": 1, "ratio": 1.x}`, "(top level): is not valid JSON at byte 26 (invalid character 'x' after decimal point"},
		{"a brace too many at the end", `{"schema": 1}}`, "(top level): is not valid JSON at byte 14 (invalid character '}' after top-level value)"},
	} {
		if _, err := Decode([]byte(c.data)); err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%s: %v, want %s", c.name, err, c.want)
		}
	}
}

// OneLine makes a record's prose what validateText takes: a bench title or
// note with a control or a bidirectional control is written as one line
// of printable text, not refused later by the records' own reader.
func TestOneLineIsValidText(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"a\nb\tc", "a b c"},
		{"  x\u202Ey\u2066z\u2069 ", "x y z"},
		{"\u202Aonly\u202C", "only"},
		{"é ok", "é ok"},
	} {
		got := OneLine(c.in)
		if got != c.want {
			t.Errorf("OneLine(%q) = %q, want %q", c.in, got, c.want)
		}
		r := valid()
		r.Title, r.Notes = got, []string{got}
		if err := Validate(r); err != nil {
			t.Errorf("OneLine(%q) = %q, refused: %v", c.in, got, err)
		}
	}
}

// docs/policy.md quotes the error of a record whose run's wall_s was
// edited to 0 as Validate says it: the doc said "runs[1].wall_s: is 0
// with completion_tokens 200", which only a run edited to a rate of 0 as
// well gets, while the binary blamed tok_per_s.
func TestPolicyDocQuotesTheWallSError(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "policy.md"))
	if err != nil {
		t.Fatal(err)
	}
	r := valid()
	r.Arms[1].Runs[0].WallS = 0 // the edit; its rate and tokens as bench wrote them
	err = Validate(r)
	if err == nil {
		t.Fatal("a run with wall_s 0 validates")
	}
	head, _, _ := strings.Cut(err.Error(), ": a rate is") // the doc quotes up to the reason
	quote := "`record r.json: " + head + " …`"
	if text := strings.Join(strings.Fields(string(doc)), " "); !strings.Contains(text, quote) {
		t.Errorf("docs/policy.md does not quote the error as the binary prints it: want %s (the error: %v)", quote, err)
	}
}
