// Package tokenizertest is the conformance suite every tokenize.Tokenizer must pass: special tokens
// are single ids that Encode never splits and EncodeOrdinary never produces, Decode inverts the
// encoders on random Unicode, code and rendered trajectories, ids stay below VocabSize, loss masks
// match the ids, and the tokenizer gives the same ids from many goroutines at once (run the tests
// with -race to check the last one fully). A tokenizer is done when Run passes for it.
package tokenizertest

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/ndtrace/ndtrace/debugger"
	"github.com/ndtrace/ndtrace/schemas"
	"github.com/ndtrace/ndtrace/tokenize"
)

// Run runs the conformance suite against tok.
func Run(t *testing.T, tok tokenize.Tokenizer) {
	if tok.Name() == "" {
		t.Error("Name is empty")
	}
	if tok.VocabSize() <= 0 {
		t.Fatalf("VocabSize %d", tok.VocabSize())
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { tc.run(t, tok) })
	}
}

var cases = []struct {
	name string
	run  func(*testing.T, tokenize.Tokenizer)
}{
	{"SpecialTokens", testSpecialTokens},
	{"EncodeNeverSplitsSpecials", testEncodeSpecials},
	{"OrdinaryNeverSpecial", testOrdinaryNeverSpecial},
	{"RoundTripRandomUnicode", testRoundTripRandom},
	{"RoundTripCode", testRoundTripCode},
	{"RoundTripTrajectories", testTrajectories},
	{"InvalidUTF8", testInvalidUTF8},
	{"DecodeRejects", testDecodeRejects},
	{"Concurrent", testConcurrent},
}

// normalize returns x as tok's Decode(EncodeOrdinary(x)) must return it.
func normalize(tok tokenize.Tokenizer, x string) string {
	if n, ok := tok.(tokenize.Normalizer); ok {
		return n.Normalize(x)
	}
	return x
}

// specialIDs returns the id of every special token, failing the test for a missing one.
func specialIDs(t *testing.T, tok tokenize.Tokenizer) map[int32]string {
	t.Helper()
	ids := make(map[int32]string, len(tokenize.SpecialTokens))
	for _, s := range tokenize.SpecialTokens {
		id, ok := tok.SpecialID(s)
		if !ok {
			t.Fatalf("SpecialID(%s): missing", s)
		}
		if other, dup := ids[id]; dup {
			t.Fatalf("%s and %s share id %d", other, s, id)
		}
		ids[id] = s
	}
	return ids
}

// checkIDs fails the test if an id is outside [0, VocabSize).
func checkIDs(t *testing.T, tok tokenize.Tokenizer, ids []int32, what string) {
	t.Helper()
	for i, id := range ids {
		if id < 0 || int(id) >= tok.VocabSize() {
			t.Fatalf("%s: id %d at %d is outside [0, %d)", what, id, i, tok.VocabSize())
		}
	}
}

func testSpecialTokens(t *testing.T, tok tokenize.Tokenizer) {
	ids := specialIDs(t, tok)
	for id, s := range ids {
		if id < 0 || int(id) >= tok.VocabSize() {
			t.Errorf("%s: id %d outside [0, %d)", s, id, tok.VocabSize())
		}
		got, err := tok.Decode([]int32{id})
		if err != nil || got != s {
			t.Errorf("Decode(%s's id %d) = %q, %v", s, id, got, err)
		}
	}
	for _, s := range []string{"", "<|", "<|frame_sep", "frame_sep", "<|pad|>", "<|endoftext|>", "<|FRAME_SEP|>", " <|frame_sep|>"} {
		if id, ok := tok.SpecialID(s); ok {
			t.Errorf("SpecialID(%q) = %d, want none", s, id)
		}
	}
}

func testEncodeSpecials(t *testing.T, tok tokenize.Tokenizer) {
	for _, s := range tokenize.SpecialTokens {
		want, _ := tok.SpecialID(s)
		ids, err := tokenize.Encode(tok, s)
		if err != nil || len(ids) != 1 || ids[0] != want {
			t.Errorf("Encode(%s) = %v, %v; want [%d]", s, ids, err, want)
		}
		for _, ctx := range []string{"x%sy", " %s ", "<|%s|>", "%s%s", "<%s>", "|%s|", "\n%s\n", "é%s😀"} {
			text := strings.ReplaceAll(ctx, "%s", s)
			ids, err := tokenize.Encode(tok, text)
			if err != nil {
				t.Fatalf("Encode(%q): %v", text, err)
			}
			checkIDs(t, tok, ids, text)
			if n, wantN := count(ids, want), strings.Count(text, s); n != wantN {
				t.Errorf("Encode(%q) has %d × %s's id, want %d: %v", text, n, s, wantN, ids)
			}
			back, err := tok.Decode(ids)
			if err != nil || back != normalize(tok, text) {
				t.Errorf("Decode(Encode(%q)) = %q, %v", text, back, err)
			}
		}
	}
}

func count(ids []int32, id int32) int {
	n := 0
	for _, x := range ids {
		if x == id {
			n++
		}
	}
	return n
}

func testOrdinaryNeverSpecial(t *testing.T, tok tokenize.Tokenizer) {
	special := specialIDs(t, tok)
	texts := []string{strings.Join(tokenize.SpecialTokens, ""), strings.Join(tokenize.SpecialTokens, " "),
		strings.Join(tokenize.SpecialTokens, "\n"), "<|endoftext|><|im_start|><|begin_of_text|>x<|end_of_text|>"}
	for _, s := range tokenize.SpecialTokens {
		texts = append(texts, s, "a"+s+"b", " "+s, s+"\n", "'"+s+"'", strings.ToUpper(s))
	}
	for _, text := range texts {
		ids := tok.EncodeOrdinary(text)
		checkIDs(t, tok, ids, text)
		for _, id := range ids {
			if s, ok := special[id]; ok {
				t.Fatalf("EncodeOrdinary(%q) produced %s (id %d): %v", text, s, id, ids)
			}
		}
		back, err := tok.Decode(ids)
		if err != nil || back != normalize(tok, text) {
			t.Errorf("Decode(EncodeOrdinary(%q)) = %q, %v", text, back, err)
		}
	}
}

// runes is a pool of characters of every class that pre-tokenizers tell apart.
var runes = []rune("abcxyzABCXYZ0123456789 _-+*/=<>()[]{}:;,.'\"!?#@$%^&|~`\\\t\n\r\v\f" +
	"\u0085\u00a0\u1680\u2000\u2028\u2029\u3000\ufeff\u200b" + // white space and look-alikes
	"éÉßſǅʰא中文한국어にほんアイ\u0627\u0301\u0903\u20dd\u064b" + // letters and marks
	"٣४Ⅻ²½０" + // numbers
	"😀👍🏽🇩🇪𝔘𐐀©€\ufffd\x00\x01\x7f")

// RandomText returns n characters drawn from a pool of every character class that pre-tokenizers
// distinguish, with runs of repeated characters and spaces.
func RandomText(r *rand.Rand, n int) string {
	var b strings.Builder
	for b.Len() < n {
		switch r.IntN(12) {
		case 0:
			b.WriteString(strings.Repeat(" ", 1+r.IntN(9)))
		case 1:
			b.WriteString(strings.Repeat(string(runes[r.IntN(len(runes))]), 1+r.IntN(20)))
		case 2:
			b.WriteRune(rune(0x20 + r.IntN(0x2ffe0))) // any code point (surrogates become U+FFFD)
		default:
			b.WriteRune(runes[r.IntN(len(runes))])
		}
	}
	return b.String()
}

func testRoundTripRandom(t *testing.T, tok tokenize.Tokenizer) {
	r := rand.New(rand.NewPCG(7, uint64(len(tok.Name()))))
	for i := 0; i < 500; i++ {
		roundTrip(t, tok, RandomText(r, 1+r.IntN(200)))
	}
	// One long piece (a run with no split point) exercises the long-piece path of BPE merging.
	roundTrip(t, tok, strings.Repeat("ab", 3000))
	roundTrip(t, tok, strings.Repeat("+", 5000))
	roundTrip(t, tok, strings.Repeat(" ", 4097)+"x")
	roundTrip(t, tok, "")
}

func roundTrip(t *testing.T, tok tokenize.Tokenizer, text string) []int32 {
	t.Helper()
	ids := tok.EncodeOrdinary(text)
	checkIDs(t, tok, ids, text)
	back, err := tok.Decode(ids)
	if want := normalize(tok, text); err != nil || back != want {
		t.Fatalf("Decode(EncodeOrdinary(%q)) = %q, %v; want %q", text, back, err, want)
	}
	return ids
}

// Code is source text in a few languages, as trajectories' CODE and SRC hold it.
var Code = []string{
	"def f(nums):\n    out = []\n    for n in nums:\n        out.append(n * n)\n    return out\n",
	"class Stack:\n\tdef __init__(self):\n\t\tself.items: list[int] = []\r\n\n\n    # trailing   \n",
	"if __name__ == '__main__':\n    print(f\"{x!r:>10} {y:.3f}\", end='')  # don't   WE'LL\n",
	"s = 'naïve café — ünïcödé ﬁ 中文 😀'\nassert s.upper() == \"NAÏVE\"\n",
	"x = [1_000_000, 0xFF, 3.14e-10, 12345678901234567890]\nlambda a, *b, **c: (a, b, c)\n",
	"func main() {\n\tfmt.Println(\"hi\")\n}\n// <|not_special|> <| x |>\n",
	"    \n\n  \t \n",
	"\"\"\"Docstring with 'quotes', \\\"escapes\\\" and \\\\backslashes\\\\.\"\"\"\n",
}

func testRoundTripCode(t *testing.T, tok tokenize.Tokenizer) {
	for _, c := range Code {
		if ids := roundTrip(t, tok, c); len(ids) == 0 {
			t.Errorf("EncodeOrdinary(%q) is empty", c)
		}
	}
}

// Trajectories returns rendered trajectories, forward and inverse, with Unicode in code and values.
func Trajectories(t testing.TB) []string {
	t.Helper()
	v := func(s string) *string { return &s }
	loc := func(kv ...string) schemas.Locals {
		l := schemas.Locals{}
		for i := 0; i+1 < len(kv); i += 2 {
			l = append(l, schemas.Var{Name: kv[i], Value: kv[i+1]})
		}
		return l
	}
	code := "def f(s):\n    t = s + 'é'\n    return t * 2\n\ndef main():\n    return f('ü😀')\n"
	trajs := []debugger.Trajectory{
		{Direction: debugger.Forward, Code: code, Exit: debugger.ExitNormal, Steps: []debugger.Step{
			{State: debugger.State{Kind: debugger.KindCall, Src: "def main():", Shown: loc()}, Action: debugger.StepInto},
			{State: debugger.State{Kind: debugger.KindLine, Src: "    return f('ü😀')", Shown: loc()}, Action: debugger.StepInto},
			{State: debugger.State{Kind: debugger.KindCall, Src: "def f(s):", Shown: loc("s", "'ü😀'")}, Action: debugger.StepOver},
			{State: debugger.State{Kind: debugger.KindLine, Src: "    return t * 2", Shown: loc("t", "'ü😀é'"), Elided: true}, Action: debugger.Breakpoint, Arg: "    return f('ü😀')"},
			{State: debugger.State{Kind: debugger.KindReturn, Src: "    return t * 2", Value: v("'<|frame_sep|> \"x\"\n'")}, Action: debugger.StepReturn},
			{State: debugger.State{Kind: debugger.KindException, Src: "    return f('ü😀')", Value: v("ValueError('bad')")}, Action: debugger.Continue},
		}},
		{Direction: debugger.Inverse, Code: code, Exit: debugger.InvExitEntry, Steps: []debugger.Step{
			{State: debugger.State{Kind: debugger.KindInvReturn, Src: "    return f('ü😀')", Value: v("'ü😀éü😀é'")}, Action: debugger.InvStepInto},
			{State: debugger.State{Kind: debugger.KindInvLineCall, Src: "    return f('ü😀')", Shown: loc(), Elided: true}, Action: debugger.InvStepOver},
			{State: debugger.State{Kind: debugger.KindInvLine, Src: "    t = s + 'é'", Shown: loc("s", "'ü😀'")}, Action: debugger.InvStepCall},
			{State: debugger.State{Kind: debugger.KindInvCall, Src: "def f(s):", Shown: loc("s", "'ü😀'")}, Action: debugger.InvStepOver},
			{State: debugger.State{Kind: debugger.KindInvException, Src: "", Value: v("KeyError(1)")}, Action: debugger.InvStepOver},
		}},
		{Direction: debugger.Forward, Code: "x = 1\n", Exit: debugger.ExitNever},
		{Direction: debugger.Forward, Code: Code[0], Exit: debugger.ExitError, Steps: []debugger.Step{
			{State: debugger.State{Kind: debugger.KindCall, Src: "def f(nums):", Shown: loc("nums", "[1, 2, 3]")}, Action: debugger.StepOver},
		}},
	}
	var out []string
	for i, tr := range trajs {
		text, err := tokenize.Render(tr)
		if err != nil {
			t.Fatalf("trajectory %d: %v", i, err)
		}
		out = append(out, text)
	}
	return out
}

func testTrajectories(t *testing.T, tok tokenize.Tokenizer) {
	frame, _ := tok.SpecialID(tokenize.FrameSep)
	for _, text := range Trajectories(t) {
		ids, err := tokenize.Encode(tok, text)
		if err != nil {
			t.Fatalf("Encode: %v", err)
		}
		checkIDs(t, tok, ids, "trajectory")
		back, err := tok.Decode(ids)
		if err != nil || back != text {
			t.Fatalf("Decode(Encode(trajectory)) = %q, %v\nwant %q", back, err, text)
		}
		if n, want := count(ids, frame), strings.Count(text, tokenize.FrameSep); n != want {
			t.Errorf("%d frame ids for %d <|frame_sep|>", n, want)
		}
		for _, mode := range []tokenize.MaskMode{tokenize.MaskStates, tokenize.MaskAll} {
			mask, err := tokenize.LossMask(tok, ids, mode)
			if err != nil || len(mask) != len(ids) {
				t.Errorf("LossMask(%s): %d entries for %d ids, %v", mode, len(mask), len(ids), err)
			}
		}
	}
}

func testInvalidUTF8(t *testing.T, tok tokenize.Tokenizer) {
	for _, s := range []string{"\xff", "a\xc3", "\xe2\x82", "\xed\xa0\x80", "x\x80y z", "\xf4\x90\x80\x80", string([]byte{0xc0, 0xaf})} {
		ids := tok.EncodeOrdinary(s) // must not panic
		checkIDs(t, tok, ids, fmt.Sprintf("%q", s))
		if _, err := tok.Decode(ids); err == nil && !utf8.ValidString(normalize(tok, s)) {
			t.Errorf("Decode of %q's ids accepted invalid UTF-8", s)
		}
	}
}

func testDecodeRejects(t *testing.T, tok tokenize.Tokenizer) {
	for _, ids := range [][]int32{{-1}, {int32(tok.VocabSize())}, {0, int32(tok.VocabSize()) + 1000}} {
		if s, err := tok.Decode(ids); err == nil {
			t.Errorf("Decode(%v) = %q, want an error", ids, s)
		}
	}
	if s, err := tok.Decode(nil); err != nil || s != "" {
		t.Errorf("Decode(nil) = %q, %v", s, err)
	}
}

// testConcurrent encodes the same texts from several goroutines and compares with a sequential run.
func testConcurrent(t *testing.T, tok tokenize.Tokenizer) {
	r := rand.New(rand.NewPCG(11, 12))
	texts := append(append([]string{}, Code...), Trajectories(t)...)
	for i := 0; i < 40; i++ {
		texts = append(texts, RandomText(r, 50+r.IntN(300)))
	}
	want := make([][]int32, len(texts))
	for i, s := range texts {
		var err error
		if want[i], err = tokenize.Encode(tok, s); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	errs := make(chan string, 8)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range 3 * len(texts) {
				i := (k*7 + g*13) % len(texts)
				got, err := tokenize.Encode(tok, texts[i])
				if err == nil {
					_, err = tok.Decode(got)
				}
				if err != nil || !slices.Equal(got, want[i]) {
					errs <- fmt.Sprintf("goroutine %d, text %d: ids differ from a sequential run (%v)", g, i, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}
