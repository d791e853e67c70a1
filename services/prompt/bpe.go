package prompt

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"fmt"
	"hash/maphash"
	"io/fs"
	"math"
	"runtime"
	"strconv"
	"strings"
	"unsafe"

	"github.com/dlclark/regexp2"
	"github.com/pkoukk/tiktoken-go-loader/assets"
)

// bpeEncoding counts tokens the way tiktoken's ordinary encoding does (the
// same split pattern, the same byte-pair merges by rank), from a compact rank
// table: every token's bytes in one slice, offsets as uint32, and an
// open-addressing index of uint32 slots. A token's rank is its index: the
// rank files list tokens in rank order, 0 to n-1 (loadBPE refuses a file
// that does not). o200k_base takes ~4 MiB this way, against ~24 MiB of string maps
// in tiktoken-go, and a server keeps it for its whole life.
//
// The table lives outside the Go heap where the platform allows (see
// tableMemory): it is immutable and pointer-free, and inside the heap the
// garbage collector's headroom (GOGC) would double what it costs in memory.
type bpeEncoding struct {
	name  string
	split *regexp2.Regexp
	data  []byte   // the tokens' bytes, back to back
	off   []uint32 // token i is data[off[i]:off[i+1]]
	slots []uint32 // index+1 of a token, at its hash; 0 is empty
	mask  uint64
	seed  maphash.Seed
}

// splitPatterns are tiktoken's pre-tokenisation patterns per encoding.
var splitPatterns = map[string]string{
	EncodingO200k: strings.Join([]string{
		`[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?`,
		`[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?`,
		`\p{N}{1,3}`,
		` ?[^\s\p{L}\p{N}]+[\r\n/]*`,
		`\s*[\r\n]+`,
		`\s+(?!\S)`,
		`\s+`,
	}, "|"),
	EncodingCL100k: `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`,
}

// loadBPE builds the encoding called name from the rank file embedded in the
// binary.
func loadBPE(name string) (*bpeEncoding, error) {
	pattern, ok := splitPatterns[name]
	if !ok {
		return nil, fmt.Errorf("unknown encoding %q", name)
	}
	return buildBPE(assets.Assets, name, pattern)
}

// buildBPE builds an encoding from the rank file name+".tiktoken" in fsys
// (lines of "base64(token) rank", ranks 0, 1, 2, … in order) and the split
// pattern. It reads the file twice, streaming: once to size the table, once
// to fill it.
func buildBPE(fsys fs.FS, name, pattern string) (*bpeEncoding, error) {
	split, err := regexp2.Compile(pattern, regexp2.None)
	if err != nil {
		return nil, fmt.Errorf("encoding %s: split pattern: %w", name, err)
	}
	// Sizes: tokens and their decoded bytes.
	n, size := 0, 0
	err = scanRanks(fsys, name, func(tok []byte, rank uint64) error {
		k := base64.StdEncoding.DecodedLen(len(tok)) - (len(tok) - len(bytes.TrimRight(tok, "=")))
		if k <= 0 {
			return fmt.Errorf("encoding %s: empty token %q", name, tok)
		}
		if rank != uint64(n) {
			return fmt.Errorf("encoding %s: token %q has rank %d, want %d (ranks must be 0, 1, 2, … in order)", name, tok, rank, n)
		}
		n, size = n+1, size+k
		return nil
	})
	if err != nil {
		return nil, err
	}
	slots := 1
	for slots < 2*n {
		slots <<= 1
	}
	words := slots + n + 1 // slots, then offsets
	mem, free := tableMemory(4*words + size)
	e := &bpeEncoding{name: name, split: split, mask: uint64(slots - 1), seed: maphash.MakeSeed()}
	all := unsafe.Slice((*uint32)(unsafe.Pointer(unsafe.SliceData(mem))), words)
	e.slots, e.off = all[:slots:slots], all[slots:slots+n+1:slots+n+1]
	e.data = mem[4*words : 4*words : 4*words+size]
	if free != nil {
		runtime.AddCleanup(e, func(free func()) { free() }, free)
	}
	i := 0
	err = scanRanks(fsys, name, func(tok []byte, _ uint64) error {
		k, err := base64.StdEncoding.Decode(e.data[len(e.data):cap(e.data)], tok)
		if err != nil {
			return fmt.Errorf("encoding %s: token %q: %w", name, tok, err)
		}
		e.data = e.data[:len(e.data)+k]
		e.off[i+1] = uint32(len(e.data))
		i++
		return nil
	})
	if err != nil {
		return nil, err
	}
	for i := range n {
		tok := e.token(i)
		for h := maphash.Bytes(e.seed, tok) & e.mask; ; h = (h + 1) & e.mask {
			if e.slots[h] == 0 {
				e.slots[h] = uint32(i + 1)
				break
			}
			if bytes.Equal(e.token(int(e.slots[h]-1)), tok) {
				return nil, fmt.Errorf("encoding %s: token %q listed twice", name, tok)
			}
		}
	}
	return e, nil
}

// scanRanks calls fn with each line of the rank file called name in fsys:
// the token, still base64, and its rank.
func scanRanks(fsys fs.FS, name string, fn func(tok []byte, rank uint64) error) error {
	f, err := fsys.Open(name + ".tiktoken")
	if err != nil {
		return fmt.Errorf("encoding %s: %w", name, err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Bytes()
		if len(line) == 0 {
			continue
		}
		tok, rk, ok := bytes.Cut(line, []byte{' '})
		if !ok {
			return fmt.Errorf("encoding %s: line %q has no rank", name, line)
		}
		r, err := strconv.ParseUint(string(rk), 10, 32)
		if err != nil {
			return fmt.Errorf("encoding %s: rank %q: %w", name, rk, err)
		}
		if err := fn(tok, r); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("encoding %s: %w", name, err)
	}
	return nil
}

func (e *bpeEncoding) token(i int) []byte { return e.data[e.off[i]:e.off[i+1]] }

// lookup returns the rank of the token whose bytes are b.
func (e *bpeEncoding) lookup(b []byte) (int, bool) {
	for h := maphash.Bytes(e.seed, b) & e.mask; ; h = (h + 1) & e.mask {
		s := e.slots[h]
		if s == 0 {
			return 0, false
		}
		if bytes.Equal(e.token(int(s-1)), b) {
			return int(s - 1), true
		}
	}
}

// count returns how many tokens text encodes to as ordinary text (special
// token strings are text like any other).
func (e *bpeEncoding) count(text string) int {
	n := 0
	m, _ := e.split.FindStringMatch(text)
	for m != nil {
		n += e.countPiece([]byte(m.String()))
		m, _ = e.split.FindNextMatch(m)
	}
	return n
}

// countPiece is tiktoken's byte-pair merge of one piece: merge the adjacent
// pair of lowest rank until no pair is a token; the parts left are tokens.
func (e *bpeEncoding) countPiece(piece []byte) int {
	if len(piece) <= 1 {
		return len(piece)
	}
	if _, ok := e.lookup(piece); ok {
		return 1
	}
	// starts[i] is where part i begins; ranks[i] is the rank of parts i and
	// i+1 merged (MaxInt: not a token).
	starts := make([]int, len(piece)+1)
	ranks := make([]int, len(piece)+1)
	for i := range starts {
		starts[i] = i
	}
	pairRank := func(i int) int {
		if i+2 < len(starts) {
			if r, ok := e.lookup(piece[starts[i]:starts[i+2]]); ok {
				return r
			}
		}
		return math.MaxInt
	}
	for i := range ranks {
		ranks[i] = pairRank(i)
	}
	for len(starts) > 2 {
		best, at := math.MaxInt, -1
		for i := 0; i < len(starts)-1; i++ {
			if ranks[i] < best {
				best, at = ranks[i], i
			}
		}
		if at < 0 {
			break
		}
		starts = append(starts[:at+1], starts[at+2:]...)
		ranks = append(ranks[:at+1], ranks[at+2:]...)
		ranks[at] = pairRank(at)
		if at > 0 {
			ranks[at-1] = pairRank(at - 1)
		}
	}
	return len(starts) - 1
}

type bpeTokenizer struct{ e *bpeEncoding }

// Count encodes text as ordinary text: special-token strings such as
// "<|endoftext|>" in user input are counted as text, never rejected.
func (t bpeTokenizer) Count(text string) int {
	if text == "" {
		return 0
	}
	return t.e.count(text)
}

func (t bpeTokenizer) CountMessage(role, content string) int {
	return MessageOverhead + t.Count(role) + t.Count(content)
}
