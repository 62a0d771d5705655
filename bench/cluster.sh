# bench/run.sh's `cluster` section (sourced): replicated 256 B publishes with publisher
# confirms (window 100), 1 and 8 publishers, one subscriber, over AMQP 0-9-1 with `ferry
# perftest --queue-type quorum`, against
#   ferryd-cluster  3 ferryd nodes on 127.0.0.11-13 (separate data directories, one Raft
#                   group; the harness talks to the leader), a replicated queue;
#   rabbitmq-quorum 3 RabbitMQ nodes (Debian's package) joined into one cluster on
#                   loopback, a quorum queue led by the node the harness talks to; with
#                   BENCH_RABBITMQ_NODES=1, one node.
# Rows go to cluster.csv: broker,nodes,<the perftest columns>.

cluster_header="broker,nodes,size,npubs,nsubs,qt,count,rep,pubs_per_sec,subs_per_sec,transfers_per_sec,mbytes_per_sec,wall_secs,machine_cpu_busy_pct,broker_cpu_cores,harness_cpu_cores,status"
cluster_pubs=(1 8)
cluster_pids=()
rmq_cluster_pids=()
rmq_cluster_epmd=

stop_ferry_cluster() {
    local p
    for p in "${cluster_pids[@]}"; do stop_pid "$p" 10; done
    cluster_pids=()
}

# Starts 3 nodes; sets cluster_leader_port and cluster_leader_pid once one serves.
start_ferry_cluster() {
    local dir=$out/raw/ferry-cluster i peers= ports=() cports=()
    rm -rf "$dir"; mkdir -p "$dir"
    head -c 32 /dev/urandom | base64 >"$dir/secret"; chmod 600 "$dir/secret"
    for i in 1 2 3; do
        ports[i]=$(free_port); cports[i]=$(free_port)
        peers+=${peers:+,}$i=127.0.0.$((10 + i)):${cports[i]}
    done
    for i in 1 2 3; do
        setsid "$ferryd" --port "${ports[i]}" --interface "127.0.0.$((10 + i))" \
            --users-file "$out/raw/no-such-users-file" --data-dir "$dir/node$i" \
            --cluster-name bench --node-id "$i" --cluster-peers "$peers" \
            --cluster-secret-file "$dir/secret" >"$dir/node$i.stdout" 2>"$dir/node$i.log" &
        cluster_pids[i]=$!
    done
    local status leader= t
    for (( t = 0; t < 300; t++ )); do
        status=$("$ferry" cluster -n "127.0.0.11:${cports[1]}" --cluster-name bench \
            --secret-file "$dir/secret" status 2>/dev/null || true)
        leader=$(awk '$4 == "leader" { print $1 }' <<<"$status")
        [[ -n $leader ]] && grep -q "127.0.0.$((10 + leader)):${ports[leader]}" <<<"$status" && break
        leader=
        sleep 0.1
    done
    if [[ -z $leader ]]; then
        echo "the ferryd cluster elected no leader; see $dir/node*.log" >&2
        return 1
    fi
    # Serving takes a moment after the election.
    sleep 1
    cluster_leader_host=127.0.0.$((10 + leader))
    cluster_leader_port=${ports[leader]}
    cluster_leader_pid=${cluster_pids[leader]}
    echo "ferryd cluster: 3 nodes, leader node $leader on $cluster_leader_host:$cluster_leader_port"
}

stop_rabbitmq_cluster() {
    local p
    for p in "${rmq_cluster_pids[@]}"; do stop_pid "$p" 30; done
    rmq_cluster_pids=()
    if [[ -n $rmq_cluster_epmd ]]; then
        epmd -port "$rmq_cluster_epmd" -kill >/dev/null 2>&1 || true
        rmq_cluster_epmd=
    fi
}

# RabbitMQ nodes fb1..fbN-$$@localhost sharing one epmd and cookie; nodes 2.. join node 1.
start_rabbitmq_cluster() {   # nodes
    local n=$1 base=$out/raw/rabbitmq-cluster i dir cookie ctl=/usr/lib/rabbitmq/bin/rabbitmqctl
    if [[ ! -x $rabbitmq_bin ]]; then
        start_rabbitmq >/dev/null 2>&1 || true; stop_rabbitmq   # installs it
        [[ -x $rabbitmq_bin ]] || return 1
    fi
    rm -rf "$base"; mkdir -p "$base"
    rmq_cluster_epmd=$(free_port)
    cookie=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
    rmq_env() {   # node index -> env assignments
        local d=$base/n$1
        echo HOME="$d" RABBITMQ_NODENAME="fb$1-$$@localhost" ERL_EPMD_PORT="$rmq_cluster_epmd" \
            ERL_EPMD_ADDRESS=127.0.0.1
    }
    for (( i = 1; i <= n; i++ )); do
        dir=$base/n$i; mkdir -p "$dir"
        echo "[]." >"$dir/enabled_plugins"
        printf '%s' "$cookie" >"$dir/.erlang.cookie"; chmod 400 "$dir/.erlang.cookie"
        rmq_ports[i]=$(free_port)
        # shellcheck disable=SC2046
        env $(rmq_env "$i") RABBITMQ_NODE_IP_ADDRESS=127.0.0.1 RABBITMQ_NODE_PORT="${rmq_ports[i]}" \
            RABBITMQ_DIST_PORT="$(free_port)" \
            RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS="-kernel inet_dist_use_interface {127,0,0,1}" \
            RABBITMQ_MNESIA_BASE="$dir/mnesia" RABBITMQ_LOG_BASE="$dir/log" \
            RABBITMQ_ENABLED_PLUGINS_FILE="$dir/enabled_plugins" RABBITMQ_CONF_ENV_FILE="$dir/env.conf" \
            RABBITMQ_CONFIG_FILE="$dir/rabbitmq" RABBITMQ_ADVANCED_CONFIG_FILE="$dir/advanced.config" \
            RABBITMQ_PID_FILE="$dir/pid" \
            setsid "$rabbitmq_bin" >"$dir/stdout" 2>"$dir/stderr" &
        rmq_cluster_pids[i]=$!
    done
    for (( i = 1; i <= n; i++ )); do
        if ! wait_for_line "$base/n$i/stdout" 'Starting broker.*completed' 180 "${rmq_cluster_pids[i]}"; then
            echo "RabbitMQ node $i did not start; see $base/n$i" >&2
            return 1
        fi
    done
    for (( i = 2; i <= n; i++ )); do
        # shellcheck disable=SC2046
        if ! { env $(rmq_env "$i") "$ctl" -n "fb$i-$$@localhost" stop_app &&
               env $(rmq_env "$i") "$ctl" -n "fb$i-$$@localhost" join_cluster "fb1-$$@localhost" &&
               env $(rmq_env "$i") "$ctl" -n "fb$i-$$@localhost" start_app; } >>"$base/join.log" 2>&1; then
            echo "RabbitMQ node $i could not join the cluster; see $base/join.log" >&2
            return 1
        fi
    done
    # shellcheck disable=SC2046
    env $(rmq_env 1) "$ctl" -n "fb1-$$@localhost" cluster_status >"$base/cluster_status.txt" 2>&1 || true
    rmq_leader_port=${rmq_ports[1]}
    rmq_leader_pid=$(cat "$base/n1/pid" 2>/dev/null || echo "${rmq_cluster_pids[1]}")
    echo "RabbitMQ $(rabbitmq_version): $n node(s), the harness on node 1 (127.0.0.1:$rmq_leader_port)"
}

cluster_points() {   # label nodes
    local n
    pt_csv=$out/cluster.csv pt_prefix=$2
    pt_extra=(--protocol amqp0-9-1 --queue-type quorum --confirm 100 --durable yes)
    for n in "${cluster_pubs[@]}"; do
        perftest_point 256 "$n" 1 "$perf_repeats" 1
    done
    pt_csv= pt_prefix= pt_extra=()
}

measure_cluster() {
    echo "cluster: replicated 256 B publishes with confirms (window 100), 1 and 8 publishers"
    if start_ferry_cluster; then
        set_broker ferryd-cluster "$cluster_leader_host" "$cluster_leader_port" "$cluster_leader_pid" 0 \
            --username guest --password guest
        cluster_points ferryd-cluster 3
    fi
    stop_ferry_cluster
    if (( rabbitmq )); then
        local nodes=${BENCH_RABBITMQ_NODES:-3}
        if start_rabbitmq_cluster "$nodes"; then
            set_broker rabbitmq-quorum 127.0.0.1 "$rmq_leader_port" "$rmq_leader_pid" "$other_max_count" \
                --username guest --password guest
            cluster_points rabbitmq-quorum "$nodes"
        fi
        stop_rabbitmq_cluster
    fi
}
