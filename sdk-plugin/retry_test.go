package sdk_test

import (
	"testing"
	"time"

	sdk "adhost/sdk-plugin"
)

func TestRetryAfterMs(t *testing.T) {
	now, err := time.Parse(time.RFC1123, "Mon, 30 Nov 2026 10:00:00 GMT")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		in   string
		want int64
	}{
		{"", 0}, {"  ", 0}, {"2", 2000}, {" 2 ", 2000}, {"0.5", 500}, {"0", 0},
		{"-1", 0}, {"abc", 0}, {"999999999", 0}, {"86400", 86400000}, {"86401", 0},
		{"Mon, 30 Nov 2026 10:00:30 GMT", 30000}, {"Mon, 30 Nov 2026 09:00:00 GMT", 0},
		{"Wed, 02 Dec 2026 10:00:00 GMT", sdk.MaxRetryAfter.Milliseconds()},
	} {
		if got := sdk.RetryAfterMs(tc.in, now); got != tc.want {
			t.Errorf("RetryAfterMs(%q) = %d, want %d", tc.in, got, tc.want)
		}
	}
}
