#!/usr/bin/env bash
# scripts/gpu/unpack_bins.sh NAME... — sourced on the GPU machine from the repository root, with
# gpu-pack/ carried: unpacks gpu-pack/bin-NAME.tar.xz (scripts/gpu/pack_bins.sh) into
# /tmp/jllm-bin/NAME/ for each NAME, the runtime libraries of the carried .debs (PCRE2, utf8proc,
# xxhash) into /tmp/jllm-deps, prepends them to LD_LIBRARY_PATH, and links the build's source
# folder (compiled into the test programs, for tests/data) to this tree when it is not there.
for name in "$@"; do
    mkdir -p "/tmp/jllm-bin/$name" && tar -xJf "gpu-pack/bin-$name.tar.xz" -C "/tmp/jllm-bin/$name" || return 1
    src=$(sed -n 's/^source_dir //p' "/tmp/jllm-bin/$name/MANIFEST")
    if [[ -n "$src" && ! -e "$src" ]]; then
        mkdir -p "$(dirname "$src")" && ln -s "$PWD" "$src"
    fi
    # The programs at their build paths too (/tmp/jllm-bin/NAME/build): scripts/gpu/bench.sh runs
    # them with JLLM_BENCH_SKIP_BUILD=1 JLLM_GPU_BUILD=/tmp/jllm-bin/NAME/build.
    while read -r _ prog rel; do
        mkdir -p "/tmp/jllm-bin/$name/build/$(dirname "$rel")" &&
            ln -sfn "/tmp/jllm-bin/$name/$prog" "/tmp/jllm-bin/$name/build/$rel"
    done < <(grep '^path ' "/tmp/jllm-bin/$name/MANIFEST")
    echo "unpacked $name: $(head -1 "/tmp/jllm-bin/$name/MANIFEST")"
done
for deb in gpu-pack/debs/libpcre2-8-0_*.deb gpu-pack/debs/libutf8proc2_*.deb gpu-pack/debs/libxxhash0_*.deb; do
    [[ -e "$deb" ]] && dpkg -x "$deb" /tmp/jllm-deps
done
export LD_LIBRARY_PATH=/tmp/jllm-deps/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
true
