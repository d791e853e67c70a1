FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o /switchboard ./cmd/switchboard

FROM debian:bookworm-slim
RUN useradd --system --home /var/lib/switchboard switchboard && mkdir -p /var/lib/switchboard && chown switchboard /var/lib/switchboard
COPY --from=build /switchboard /usr/local/bin/switchboard
USER switchboard
ENV DATA_DIR=/var/lib/switchboard HTTP_ADDR=0.0.0.0:8080
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/switchboard"]
CMD ["serve"]
