-- POST a reservation with a fresh customerId and orderId per request.
-- VOUCHER_PATH: /vouchers/CODE/reservations
local path = os.getenv("VOUCHER_PATH")
local run = tostring(os.time()) .. tostring(math.random(1000000))
local n = 0
math.randomseed(os.time())
local off = (os.time() % 100000) * 100000 + math.random(0, 99999) * 1000000000
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
request = function()
  n = n + 1
  return wrk.format(nil, path, nil, '{"customerId":' .. string.format('%d', off + n) .. ',"orderId":"w' .. run .. '-' .. n .. '","orderAmount":5000}')
end
