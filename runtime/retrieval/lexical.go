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

// posting is one chunk's frequency of a term.
type posting struct {
	slot uint32
	tf   uint32
}

// lexIndex is an inverted index with term frequencies. Chunks have dense
// slots (reused after removal) so a query accumulates into a flat slice
// rather than a map. The corpus's lock guards it.
type lexIndex struct {
	postings map[string][]posting
	slotDoc  []*liveDoc // nil: free
	slotOrd  []int
	slotLen  []int32
	free     []uint32
	live     int
	total    int64 // sum of the live slots' lengths
}

func newLexIndex() *lexIndex { return &lexIndex{postings: map[string][]posting{}} }

// add indexes d's chunk texts, recording its slots and distinct terms
// on d.
func (x *lexIndex) add(d *liveDoc, texts []string) {
	distinct := map[string]bool{}
	d.slots = make([]uint32, len(texts))
	for ord, t := range texts {
		tf, n := terms(t)
		var slot uint32
		if k := len(x.free); k > 0 {
			slot, x.free = x.free[k-1], x.free[:k-1]
		} else {
			slot = uint32(len(x.slotDoc))
			x.slotDoc, x.slotOrd, x.slotLen = append(x.slotDoc, nil), append(x.slotOrd, 0), append(x.slotLen, 0)
		}
		x.slotDoc[slot], x.slotOrd[slot], x.slotLen[slot] = d, ord, int32(n)
		d.slots[ord] = slot
		x.live++
		x.total += int64(n)
		for term, f := range tf {
			x.postings[term] = append(x.postings[term], posting{slot: slot, tf: uint32(f)})
			distinct[term] = true
		}
	}
	d.terms = make([]string, 0, len(distinct))
	for t := range distinct {
		d.terms = append(d.terms, t)
	}
}

func (x *lexIndex) remove(d *liveDoc) {
	for _, term := range d.terms {
		p := x.postings[term]
		kept := p[:0]
		for _, e := range p {
			if x.slotDoc[e.slot] != d {
				kept = append(kept, e)
			}
		}
		if len(kept) == 0 {
			delete(x.postings, term)
		} else {
			x.postings[term] = kept
		}
	}
	for _, slot := range d.slots {
		x.total -= int64(x.slotLen[slot])
		x.slotDoc[slot] = nil
		x.live--
		x.free = append(x.free, slot)
	}
}

type lexScore struct {
	slot uint32
	bm   float32
}

// score returns the BM25 score of every chunk matching a query term whose
// slot allow accepts. Collection statistics are the whole corpus's: they
// describe the language of the documents, not what a caller may see, and
// reveal nothing a score does not.
func (x *lexIndex) score(query string, allow func(slot uint32) bool) []lexScore {
	qtf, _ := terms(query)
	n := float64(x.live)
	if n == 0 || len(qtf) == 0 {
		return nil
	}
	avg := float64(x.total) / n
	if avg == 0 {
		avg = 1
	}
	acc := make([]float32, len(x.slotDoc))
	var touched []uint32
	for term := range qtf {
		p := x.postings[term]
		if len(p) == 0 {
			continue
		}
		idf := math.Log(1 + (n-float64(len(p))+0.5)/(float64(len(p))+0.5))
		for _, e := range p {
			if !allow(e.slot) {
				continue
			}
			tf := float64(e.tf)
			l := float64(x.slotLen[e.slot])
			if acc[e.slot] == 0 {
				touched = append(touched, e.slot)
			}
			acc[e.slot] += float32(idf * tf * (bm25K1 + 1) / (tf + bm25K1*(1-bm25B+bm25B*l/avg)))
		}
	}
	out := make([]lexScore, len(touched))
	for i, s := range touched {
		out[i] = lexScore{slot: s, bm: acc[s]}
	}
	return out
}
