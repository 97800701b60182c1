package client

import (
	"encoding/json"
	"testing"

	"adhost/runtime/protocol"
)

func TestRetrievalOption(t *testing.T) {
	floor := -0.5
	for _, tc := range []struct {
		req  *SearchRequest
		want string
	}{
		{&SearchRequest{Corpus: "docs"}, `{"corpus":"docs"}`},
		{&SearchRequest{Corpus: "docs", Query: "q", SourceIDs: []string{"a"}, Limit: 4, MinScore: &floor},
			`{"corpus":"docs","query":"q","sourceIds":["a"],"limit":4,"minScore":-0.5}`},
	} {
		if got := string(RetrievalOption(tc.req)); got != tc.want {
			t.Errorf("RetrievalOption(%+v) = %s, want %s", tc.req, got, tc.want)
		}
	}
	res := &protocol.RunResult{Retrieval: json.RawMessage(`{"corpus":"docs","index":{"dimensions":8},"hits":[{"chunkId":"c","text":"t","score":0.5}],"truncated":false}`)}
	r, err := ResultRetrieval(res)
	if err != nil || r.Corpus != "docs" || len(r.Hits) != 1 || r.Hits[0].ChunkID != "c" {
		t.Errorf("ResultRetrieval: %+v %v", r, err)
	}
	if r, err := ResultRetrieval(&protocol.RunResult{}); r != nil || err != nil {
		t.Errorf("without retrieval: %+v %v", r, err)
	}
}
