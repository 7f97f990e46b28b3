/*
 * A client for the seed-004 C++ server (Ian Kelk's CS265 LSM tree) that
 * prints every reply, used by bench/seed004-server.sh to check the server's
 * gets. The seed's own client (lsm/client.cpp) prints the same lines, but
 * each of its commands waits about 40 ms here: the server sends a reply and
 * its end marker in two send() calls, so Nagle's algorithm holds the marker
 * until the client's delayed ACK (40 ms on Linux). This client asks for an
 * immediate ACK (TCP_QUICKACK) before every read instead. It also exits
 * once stdin ends (the seed's client can hang in recv() after its last
 * reply).
 *
 * The protocol, from the seed's lsm/server.cpp and lsm/data_types.hpp: one
 * command per message, without its newline (the server parses each recv()
 * as one command, so only one may be in flight); every reply ends with
 * "<END_OF_MESSAGE>"; "<OK>" answers puts and deletes, "<NO_VALUE>" an
 * absent key or an empty range.
 *
 * Output, as the seed's client and `lamina client`: nothing for "<OK>", an
 * empty line for "<NO_VALUE>", the reply otherwise.
 *
 * Usage: seed004_client PORT < workload > replies
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static const char END[] = "<END_OF_MESSAGE>";
static const char OK[] = "<OK>";
static const char NO_VALUE[] = "<NO_VALUE>";

static int connect_to(int port) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) {
        perror("socket");
        exit(1);
    }
    struct sockaddr_in addr = {0};
    addr.sin_family = AF_INET;
    addr.sin_port = htons((unsigned short)port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&addr, sizeof addr) < 0) {
        perror("connect");
        exit(1);
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
}

static void send_all(int fd, const char *buf, size_t len) {
    while (len > 0) {
        ssize_t n = send(fd, buf, len, 0);
        if (n <= 0) {
            perror("send");
            exit(1);
        }
        buf += n;
        len -= (size_t)n;
    }
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s PORT < workload > replies\n", argv[0]);
        return 2;
    }
    int fd = connect_to(atoi(argv[1]));
    size_t end_len = strlen(END), cap = 1 << 16, len;
    char *reply = malloc(cap);
    char *line = NULL;
    size_t line_cap = 0;
    ssize_t line_len;
    if (reply == NULL) {
        perror("malloc");
        return 1;
    }
    while ((line_len = getline(&line, &line_cap, stdin)) >= 0) {
        while (line_len > 0 && (line[line_len - 1] == '\n' || line[line_len - 1] == '\r'))
            line[--line_len] = '\0';
        if (line_len == 0)
            continue;
        send_all(fd, line, (size_t)line_len);
        len = 0;
        while (len < end_len || memcmp(reply + len - end_len, END, end_len) != 0) {
            if (len + 4096 > cap) {
                cap *= 2;
                reply = realloc(reply, cap);
                if (reply == NULL) {
                    perror("realloc");
                    return 1;
                }
            }
            int one = 1;
            setsockopt(fd, IPPROTO_TCP, TCP_QUICKACK, &one, sizeof one);
            ssize_t n = recv(fd, reply + len, cap - len, 0);
            if (n <= 0) {
                fprintf(stderr, "the server closed the connection during: %s\n", line);
                return 1;
            }
            len += (size_t)n;
        }
        len -= end_len;
        if (len == strlen(OK) && memcmp(reply, OK, len) == 0)
            continue;
        if (len == strlen(NO_VALUE) && memcmp(reply, NO_VALUE, len) == 0)
            len = 0;
        fwrite(reply, 1, len, stdout);
        putchar('\n');
    }
    free(line);
    free(reply);
    close(fd);
    return 0;
}
