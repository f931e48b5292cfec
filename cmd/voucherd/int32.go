package main

import (
	"fmt"
	"math"
)

// int32Setting returns v, the value of the flag --name, as the int32 the
// API or a library keeps it in; a value an int32 cannot hold is an error
// naming the flag, never a wrapped-around different number.
func int32Setting(name string, v int) (int32, error) {
	if v < math.MinInt32 || v > math.MaxInt32 {
		return 0, fmt.Errorf("--%s=%d does not fit in 32 bits (%d to %d)", name, v, math.MinInt32, math.MaxInt32)
	}
	return int32(v), nil
}

// checkInt32 rejects the settings that are int32 downstream (the PostgreSQL
// pool's sizes, the Kafka topics' partition count) when an int32 cannot hold
// them. After it returned nil, converting them with int32() is exact.
func (c *Config) checkInt32() error {
	for _, s := range []struct {
		name string
		v    int
	}{{"db-max-conns", c.MaxDBConns}, {"db-min-conns", c.MinDBConns}, {"kafka-partitions", c.KafkaPartitions}} {
		if _, err := int32Setting(s.name, s.v); err != nil {
			return err
		}
	}
	return nil
}
