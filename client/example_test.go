package client_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/voucherd/voucherd/client"
)

// An order service reserves a voucher at checkout, confirms it once the
// order is paid and releases it when the order is cancelled. The orderId is
// the idempotency key: the client retries with the same one.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()

	c := client.New("http://127.0.0.1:8080", "api-token",
		client.WithMaxAttempts(3),
		client.WithBackoff(20*time.Millisecond, 500*time.Millisecond))

	red, err := c.Reserve(ctx, "FLASH100", client.ReserveRequest{
		CustomerID:  "42",
		OrderID:     "order-42",
		OrderAmount: 250000,
	})
	switch {
	case client.IsCode(err, client.OutOfStock), client.IsCode(err, client.AlreadyUsed):
		fmt.Println("check out without the voucher")
		return
	case client.IsCode(err, client.NotEligible):
		var e *client.Error
		_ = errors.As(err, &e)
		fmt.Println("not eligible:", e.Reason)
		return
	case err != nil:
		log.Printf("voucherd: %v", err)
		return
	}
	fmt.Println("discount", red.DiscountAmount, "until", red.ExpiresAt)

	// ... the order is paid:
	if _, err := c.Confirm(ctx, "FLASH100", red.OrderID); err != nil {
		log.Printf("confirm: %v", err)
	}
}

// Creating a voucher needs the admin token.
func ExampleClient_CreateVoucher() {
	ctx := context.Background()
	admin := client.New("http://127.0.0.1:8080", "admin-token")
	now := time.Now()
	v, err := admin.CreateVoucher(ctx, client.Voucher{
		Code:           "FLASH100",
		DiscountAmount: 100000,
		TotalLimit:     1000,
		PerUserLimit:   1,
		StartsAt:       now,
		EndsAt:         now.Add(24 * time.Hour),
		FlashSale:      true,
	})
	if client.IsCode(err, client.VoucherExists) {
		fmt.Println("already there")
		return
	}
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(v.Code, v.TotalLimit)
}
