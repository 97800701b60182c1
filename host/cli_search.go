package host

import (
	"context"
	"fmt"
	"strings"

	"adhost/client"
)

// cliSearchCmd is `adhost search --corpus C "query"`.
func cliSearchCmd(ctx context.Context, env *cliEnv, args []string) int {
	const cmd = "search"
	fs := cliFlags(env, cmd)
	cfgPath := fs.String("config", "host.toml", "configuration file (default URL and token)")
	baseURL := fs.String("url", "", "host base URL (default: from the config's server.listen)")
	tokenFile := fs.String("token-file", "", "file holding the bearer token (default: $ADHOST_TOKEN, then the config's first file token)")
	corpus := fs.String("corpus", "", "corpus id (required)")
	limit := fs.Int("limit", 8, "passages to return, 1..16")
	pos, code, ok := cliParse(fs, args)
	if !ok {
		return code
	}
	if *corpus == "" || len(pos) != 1 || strings.TrimSpace(pos[0]) == "" {
		return cliUsageError(env, cmd, "want --corpus and exactly one query")
	}
	url, token, err := cliClientSettings(*cfgPath, *baseURL, *tokenFile)
	if err != nil {
		return env.fail(cmd, err)
	}
	c, err := client.New(url, client.WithToken(token))
	if err != nil {
		return cliClientFailed(env, cmd, url, err)
	}
	res, err := c.Search(ctx, &client.SearchRequest{Corpus: *corpus, Query: pos[0], Limit: *limit})
	if err != nil {
		return cliClientFailed(env, cmd, url, err)
	}
	for i, h := range res.Hits {
		fmt.Fprintf(env.stdout, "%d. %.3f %s@%s%s\n", i+1, h.Score, h.Source.ID, h.Source.Revision, cliLocation(h.Source.Location))
		for _, ln := range strings.Split(h.Text, "\n") {
			fmt.Fprintf(env.stdout, "   %s\n", ln)
		}
	}
	if len(res.Hits) == 0 {
		fmt.Fprintln(env.stdout, "no passages")
	} else if res.Truncated {
		fmt.Fprintln(env.stdout, "(more passages matched)")
	}
	return cliExitOK
}

func cliLocation(l *client.RetrievalLocation) string {
	if l == nil {
		return ""
	}
	var parts []string
	if l.Page > 0 {
		parts = append(parts, fmt.Sprintf("page %d", l.Page))
	}
	if l.Section != "" {
		parts = append(parts, fmt.Sprintf("section %q", l.Section))
	}
	if l.MessageID != "" {
		parts = append(parts, "message "+l.MessageID)
	}
	if l.StartLine > 0 {
		parts = append(parts, fmt.Sprintf("lines %d-%d", l.StartLine, l.EndLine))
	}
	if len(parts) == 0 {
		return ""
	}
	return " (" + strings.Join(parts, ", ") + ")"
}
