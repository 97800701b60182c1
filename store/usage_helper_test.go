package store_test

import "adhost/runtime/protocol"

func runtimeUsage(in int64) protocol.Usage { return protocol.Usage{InputTokens: &in} }
