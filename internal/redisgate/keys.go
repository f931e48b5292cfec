package redisgate

// keys names the Redis keys of one voucher. Every key carries the code as a
// hash tag ({CODE}), so all of them live in one Redis Cluster slot and one
// Lua script may touch them together.
type keys struct {
	remaining string // string int: uses left; its presence means "loaded"
	users     string // hash customerId -> held count
	orders    string // hash orderId -> encoded hold
	lock      string // string: warm-up lock token
}

// keysFor builds the keys of code under prefix. The prefix comes first and
// may not contain braces (New checks), so the first {...} of every key is the
// code's hash tag.
func keysFor(prefix, code string) keys {
	base := prefix + "voucher:{" + code + "}:"
	return keys{
		remaining: base + "remaining",
		users:     base + "users",
		orders:    base + "orders",
		lock:      base + "lock",
	}
}

// all lists the keys a voucher may own, for Forget.
func (k keys) all() []string { return []string{k.remaining, k.users, k.orders, k.lock} }
