//! HTTP-looking input on the line paths of the network (a DSL session and
//! the Redis port's requests): nothing after an HTTP request's head runs.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    lamina_server::fuzzing::http_sniff(data);
});
