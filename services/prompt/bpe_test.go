package prompt

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	tiktoken "github.com/pkoukk/tiktoken-go"
	tiktoken_loader "github.com/pkoukk/tiktoken-go-loader"
)

// TestCompactBPECountsAsTiktoken: the compact rank table counts exactly what
// tiktoken-go's ordinary encoding counts, on the project's own docs and code,
// on hand-picked edge cases and on random mixes of scripts, digits,
// punctuation, emoji and whitespace.
func TestCompactBPECountsAsTiktoken(t *testing.T) {
	tiktoken.SetBpeLoader(tiktoken_loader.NewOfflineLoader())
	corpus := []string{
		"hello world", "Hello, World!", "  leading and trailing  ", "\n\n\r\n\t",
		"I'm sure you'll see they've DONE IT'S", "ΑΒΓ αβγ Привет мир", "日本語のテキストと中文文本",
		"emoji 👩‍👩‍👧‍👦 🇩🇪 ✔︎", "<|endoftext|> is text here", "1234567890 3.14159 1,000,000",
		"func main() {\n\tfmt.Println(\"hi\")\n}\n", "https://example.org/a/b?c=d&e=f#g", "a", " ", "\u00a0\u2003x",
		strings.Repeat("a", 3000), strings.Repeat("ab ", 500), strings.Repeat("🙂", 200),
	}
	for _, pattern := range []string{"../../docs/*.md", "*.go"} {
		files, _ := filepath.Glob(pattern)
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			corpus = append(corpus, string(b))
		}
	}
	if len(corpus) < 40 {
		t.Fatalf("corpus has %d texts; the docs or sources were not found", len(corpus))
	}
	alphabet := []rune("aZ09 \t\n\r'.,;:!?/-_()[]{}\"éßøЖж中文日本한국🙂🇩\u0301\u200d")
	rng := rand.New(rand.NewPCG(1, 2))
	for range 300 {
		r := make([]rune, rng.IntN(60)+1)
		for i := range r {
			r[i] = alphabet[rng.IntN(len(alphabet))]
		}
		corpus = append(corpus, string(r))
	}
	for _, name := range []string{EncodingO200k, EncodingCL100k} {
		oracle, err := tiktoken.GetEncoding(name)
		if err != nil {
			t.Fatal(err)
		}
		e, err := loadBPE(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, text := range corpus {
			if got, want := e.count(text), len(oracle.EncodeOrdinary(text)); got != want {
				t.Errorf("%s: count(%.60q…) = %d, tiktoken says %d", name, text, got, want)
			}
		}
	}
}

func TestLoadBPERefusesAnUnknownEncoding(t *testing.T) {
	if _, err := loadBPE("p99k_base"); err == nil || !strings.Contains(err.Error(), `unknown encoding "p99k_base"`) {
		t.Fatalf("err = %v", err)
	}
}

// TestBuildBPEMergesByRankAndChecksTheFile: a small rank file ("a", "b",
// "ab", "abab"'s halves) merges as tiktoken does, and a file whose ranks are
// out of order or that lists a token twice is refused, naming the encoding.
func TestBuildBPEMergesByRankAndChecksTheFile(t *testing.T) {
	t.Parallel()
	pattern := splitPatterns[EncodingCL100k]
	fsys := fstest.MapFS{
		// a b c ab bc: "abc" merges a+b first (rank 3 < 4), then ab+c is no token.
		"tiny.tiktoken":  {Data: []byte("YQ== 0\nYg== 1\nYw== 2\nYWI= 3\nYmM= 4\n")},
		"order.tiktoken": {Data: []byte("YQ== 0\nYg== 2\n")},
		"twice.tiktoken": {Data: []byte("YQ== 0\nYQ== 1\n")},
	}
	e, err := buildBPE(fsys, "tiny", pattern)
	if err != nil {
		t.Fatal(err)
	}
	for text, want := range map[string]int{"a": 1, "ab": 1, "abc": 2, "bc": 1, "abab": 2, "cab": 2, "ab ab": 3} {
		if got := e.count(text); got != want {
			t.Errorf("count(%q) = %d, want %d", text, got, want)
		}
	}
	if r, ok := e.lookup([]byte("bc")); !ok || r != 4 {
		t.Errorf(`lookup("bc") = %d, %v; want rank 4`, r, ok)
	}
	for name, want := range map[string]string{"order": `encoding order: token "Yg==" has rank 2, want 1`, "twice": `encoding twice: token "a" listed twice`} {
		if _, err := buildBPE(fsys, name, pattern); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err = %v, want %q", name, err, want)
		}
	}
}
