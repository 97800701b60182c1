package host

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"adhost/client"
)

func init() {
	cliHelp["ingest"] = `usage: adhost ingest --corpus C [--url U] [--token-file F] FILE...

Ingests each file into corpus C of a running host (wire-extensions §6.5):
a file whose content starts a PDF (a "%PDF-" header in its first 1024
bytes) or named .pdf as PDF, .md and .markdown as Markdown, anything else
as plain text. A PDF must fit one request body (1,000,000 bytes with its
base64, so about 730 KiB); a bigger one is refused here, before sending.
The source id is the file's base name (characters a RetrievalId does not
allow become '-'), the revision "sha256-" and the content's digest, so
ingesting an unchanged file again answers "unchanged". Progress goes to
stderr, one receipt per file to stdout as a JSON line.`
	cliHelp["search"] = `usage: adhost search --corpus C [--limit N] [--url U] [--token-file F] "query"

Searches corpus C of a running host (wire-extensions §6.2) and prints the
ranked passages with their score, source, revision and location.`
}

var cliSourceChars = regexp.MustCompile(`[^a-zA-Z0-9._:-]`)

// cliSourceID turns a file name into a RetrievalId.
func cliSourceID(path string) string {
	id := cliSourceChars.ReplaceAllString(filepath.Base(path), "-")
	id = strings.TrimLeft(id, "._:-")
	if id == "" {
		id = "file"
	}
	return id[:min(len(id), 128)]
}

// cliMaxBody is the host's request body limit (wire-core), base64 included.
const cliMaxBody = 1_000_000

// cliIsPDF reports a PDF header starting in the first 1024 bytes, where PDF
// readers look for it (ISO 32000-1 §7.5.2 allows junk before it).
func cliIsPDF(data []byte) bool {
	const marker = "%PDF-"
	return bytes.Contains(data[:min(len(data), 1024+len(marker)-1)], []byte(marker))
}

// cliIngestCmd is `adhost ingest --corpus C FILE…`.
func cliIngestCmd(ctx context.Context, env *cliEnv, args []string) int {
	const cmd = "ingest"
	fs := cliFlags(env, cmd)
	cfgPath := fs.String("config", "host.toml", "configuration file (default URL and token)")
	baseURL := fs.String("url", "", "host base URL (default: from the config's server.listen)")
	tokenFile := fs.String("token-file", "", "file holding the bearer token (default: $ADHOST_TOKEN, then the config's first file token)")
	corpus := fs.String("corpus", "", "corpus id (required)")
	files, code, ok := cliParse(fs, args)
	if !ok {
		return code
	}
	if *corpus == "" || len(files) == 0 {
		return cliUsageError(env, cmd, "want --corpus and at least one FILE")
	}
	url, token, err := cliClientSettings(*cfgPath, *baseURL, *tokenFile)
	if err != nil {
		return env.fail(cmd, err)
	}
	c, err := client.New(url, client.WithToken(token))
	if err != nil {
		return cliClientFailed(env, cmd, url, err)
	}
	failed := false
	for i, f := range files {
		fmt.Fprintf(env.stderr, "adhost ingest: [%d/%d] %s\n", i+1, len(files), f)
		data, err := os.ReadFile(f)
		if err != nil {
			fmt.Fprintf(env.stderr, "adhost ingest: %s: %v\n", f, cliUnwrapPath(err))
			failed = true
			continue
		}
		sum := sha256.Sum256(data)
		src := client.RetrievalSource{ID: cliSourceID(f), Revision: "sha256-" + hex.EncodeToString(sum[:]), Title: filepath.Base(f)}
		doc := map[string]any{"type": "text", "source": src, "mediaType": "text/plain", "text": string(data)}
		ext := strings.ToLower(filepath.Ext(f))
		switch {
		case cliIsPDF(data) || ext == ".pdf":
			doc = map[string]any{"type": "pdf", "source": src, "mediaType": "application/pdf", "data": base64.StdEncoding.EncodeToString(data)}
		case ext == ".md" || ext == ".markdown":
			doc["mediaType"] = "text/markdown"
		}
		raw, _ := json.Marshal(doc)
		if doc["type"] == "pdf" && len(raw)+len(*corpus)+64 > cliMaxBody {
			fmt.Fprintf(env.stderr, "adhost ingest: %s: a PDF of %d bytes does not fit one request (the body limit is %d bytes, base64 included)\n", f, len(data), cliMaxBody)
			failed = true
			continue
		}
		rec, err := c.Ingest(ctx, *corpus, src, raw)
		if err != nil {
			fmt.Fprintf(env.stderr, "adhost ingest: %s: %v\n", f, err)
			failed = true
			continue
		}
		b, _ := json.Marshal(rec)
		fmt.Fprintf(env.stdout, "%s\n", b)
	}
	if failed {
		return cliExitFail
	}
	return cliExitOK
}
