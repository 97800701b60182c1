package retrieval

import (
	"context"

	"adhost/runtime"
	"adhost/runtime/protocol"
)

// Ingest serves POST /v1/retrieval/ingest.
func (s *Service) Ingest(ctx context.Context, p *runtime.Principal, body []byte) ([]byte, error) {
	return nil, protocol.New(CodeUnsupportedIngestion)
}
