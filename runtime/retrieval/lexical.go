package retrieval

import (
	"math"
	"sync"

	"github.com/blevesearch/bleve/v2/analysis"
	"github.com/blevesearch/bleve/v2/analysis/lang/en"
	"github.com/blevesearch/bleve/v2/analysis/token/lowercase"
	"github.com/blevesearch/bleve/v2/analysis/token/stop"
	"github.com/blevesearch/bleve/v2/analysis/tokenizer/unicode"
)

// The lexical side of hybrid search: BM25 over the chunks' terms, with
// bleve's English analysis (Unicode word segmentation, lower case,
// possessives, the Snowball stop list, the Snowball English stemmer) so
// that tokenizing and stemming are a maintained library's, not ours.
//
// It is derived state: built in memory from the documents in the store at
// Open and updated with every index and delete, so there is no second
// on-disk index that could disagree with Badger.
//
// When it helps: queries naming rare exact terms — identifiers, part
// numbers, names, error codes — that a lexical embedder spreads over
// buckets or a semantic one blurs into their neighbourhood. Vector
// ranking helps where words differ but meaning does not (with a semantic
// embedder) and where the query is long. Fusion keeps what either finds.

// BM25 parameters (the usual defaults) and the RRF constant (Cormack et
// al.: 60 is robust across collections).
const (
	bm25K1 = 1.2
	bm25B  = 0.75
	rrfK   = 60
)

var (
	analyzerOnce sync.Once
	analyzer     *analysis.DefaultAnalyzer
)

func englishAnalyzer() *analysis.DefaultAnalyzer {
	analyzerOnce.Do(func() {
		stops := analysis.NewTokenMap()
		if err := stops.LoadBytes(en.EnglishStopWords); err != nil {
			panic("retrieval: the English stop list does not load: " + err.Error())
		}
		analyzer = &analysis.DefaultAnalyzer{
			Tokenizer: unicode.NewUnicodeTokenizer(),
			TokenFilters: []analysis.TokenFilter{
				en.NewPossessiveFilter(),
				lowercase.NewLowerCaseFilter(),
				stop.NewStopTokensFilter(stops),
				en.NewEnglishStemmerFilter(),
			},
		}
	})
	return analyzer
}

// terms returns the analysed terms of text with their frequencies.
func terms(text string) (map[string]int, int) {
	ts := englishAnalyzer().Analyze([]byte(text))
	tf := make(map[string]int, len(ts))
	for _, t := range ts {
		tf[string(t.Term)]++
	}
	return tf, len(ts)
}

// chunkKey names one chunk: the document's lexical number and the
// chunk's ordinal (< 256).
type chunkKey uint64

func keyOf(seq uint64, ord int) chunkKey { return chunkKey(seq<<8 | uint64(ord)) }
func (k chunkKey) seq() uint64           { return uint64(k) >> 8 }
func (k chunkKey) ord() int              { return int(k & 0xff) }

// lexIndex is an inverted index with term frequencies. The corpus's lock
// guards it.
type lexIndex struct {
	next     uint64
	postings map[string]map[chunkKey]int32
	lens     map[chunkKey]int32
	terms    map[uint64][]string // each document's distinct terms, for removal
	total    int64               // sum of lens
}

func newLexIndex() *lexIndex {
	return &lexIndex{postings: map[string]map[chunkKey]int32{}, lens: map[chunkKey]int32{}, terms: map[uint64][]string{}}
}

// add indexes a document's chunk texts and returns its number.
func (x *lexIndex) add(texts []string) uint64 {
	x.next++
	seq := x.next
	distinct := map[string]bool{}
	for ord, t := range texts {
		tf, n := terms(t)
		k := keyOf(seq, ord)
		x.lens[k] = int32(n)
		x.total += int64(n)
		for term, f := range tf {
			p := x.postings[term]
			if p == nil {
				p = map[chunkKey]int32{}
				x.postings[term] = p
			}
			p[k] = int32(f)
			distinct[term] = true
		}
	}
	list := make([]string, 0, len(distinct))
	for t := range distinct {
		list = append(list, t)
	}
	x.terms[seq] = list
	return seq
}

func (x *lexIndex) remove(seq uint64) {
	for _, term := range x.terms[seq] {
		p := x.postings[term]
		for k := range p {
			if k.seq() == seq {
				delete(p, k)
			}
		}
		if len(p) == 0 {
			delete(x.postings, term)
		}
	}
	delete(x.terms, seq)
	for ord := 0; ord < 256; ord++ {
		k := keyOf(seq, ord)
		n, ok := x.lens[k]
		if !ok {
			break
		}
		x.total -= int64(n)
		delete(x.lens, k)
	}
}

// score returns the BM25 score of every chunk matching a query term whose
// key allow accepts. Collection statistics are the whole corpus's: they
// describe the language of the documents, not what a caller may see, and
// reveal nothing a score does not.
func (x *lexIndex) score(query string, allow func(chunkKey) bool) map[chunkKey]float64 {
	qtf, _ := terms(query)
	n := float64(len(x.lens))
	if n == 0 || len(qtf) == 0 {
		return nil
	}
	avg := float64(x.total) / n
	if avg == 0 {
		avg = 1
	}
	out := map[chunkKey]float64{}
	for term := range qtf {
		p := x.postings[term]
		if len(p) == 0 {
			continue
		}
		idf := math.Log(1 + (n-float64(len(p))+0.5)/(float64(len(p))+0.5))
		for k, f := range p {
			if !allow(k) {
				continue
			}
			tf := float64(f)
			l := float64(x.lens[k])
			out[k] += idf * tf * (bm25K1 + 1) / (tf + bm25K1*(1-bm25B+bm25B*l/avg))
		}
	}
	return out
}
