package main

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestInt32Setting(t *testing.T) {
	t.Parallel()
	for _, v := range []int{0, 1, -1, math.MaxInt32, math.MinInt32} {
		got, err := int32Setting("total", v)
		require.NoError(t, err)
		require.Equal(t, int64(v), int64(got))
	}
	// 2^32+1 would wrap around to 1: a voucher of one use instead of an error.
	for _, v := range []int{math.MaxInt32 + 1, 1<<32 + 1, math.MinInt32 - 1} {
		_, err := int32Setting("total", v)
		require.ErrorContains(t, err, "--total=")
		require.ErrorContains(t, err, "does not fit in 32 bits")
	}
}

func TestValidateRejectsSettingsPastInt32(t *testing.T) {
	t.Parallel()
	base := Config{FlashWrites: "sync", ReservationTTL: time.Minute, MaxDBConns: 32, MinDBConns: wholePool}
	big := base
	big.MaxDBConns = 1<<32 + 32
	require.ErrorContains(t, big.validate(), "--db-max-conns=4294967328 does not fit in 32 bits")
	parts := base
	parts.KafkaPartitions = 1<<32 + 3
	require.ErrorContains(t, parts.validate(), "--kafka-partitions=4294967299 does not fit in 32 bits")
	require.ErrorContains(t, parts.checkInt32(), "--kafka-partitions=")
	require.NoError(t, base.checkInt32())
}
