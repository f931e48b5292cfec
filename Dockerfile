# voucherd: a static binary on a distroless base.
#   docker build -t voucherd .
#   docker run -e VOUCHERD_DATABASE_URL=... -p 8080:8080 voucherd
# See docker-compose.yml for PostgreSQL, Redis and Kafka beside it.

FROM golang:1.26 AS build
WORKDIR /src
# Modules first, so that a code change does not download them again.
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -buildvcs=false -ldflags="-s -w" -o /out/voucherd ./cmd/voucherd

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/voucherd /voucherd
ENV VOUCHERD_ADDR=0.0.0.0:8080
EXPOSE 8080
USER nonroot:nonroot
ENTRYPOINT ["/voucherd"]
CMD ["serve"]
